"""Weight thresholds as a choice (calib.weight_method): mse never has more weight error than
minmax, saturates outliers only when that pays, and reaches the calibration table."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.quantize.calibration.methods import choose_weights as choose, weight_methods
from core.quantize.calibration.weights import pow2_error, threshold_error


@st.composite
def weights_with_outliers(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = rng.normal(0.0, draw(st.floats(1e-3, 2.0)), size=draw(st.integers(4, 400)))
    for _ in range(draw(st.integers(0, 3))):
        values[rng.integers(len(values))] *= draw(st.floats(1.0, 500.0))
    return values


@settings(max_examples=200, deadline=None)
@given(weights=weights_with_outliers())
def test_mse_weights_have_at_most_the_error_of_minmax(weights):
    for pow2 in (True, False):
        minmax, mse = choose("minmax", weights, 8, pow2), choose("mse", weights, 8, pow2)
        error = (lambda c: pow2_error(weights, c.log2scale, 8)) if pow2 else (lambda c: threshold_error(weights, c.threshold, 8))
        assert error(mse) <= error(minmax) + 1e-18
        assert minmax.saturated_fraction == 0.0
        if pow2:
            assert np.abs(weights).max() <= 127 * 2.0**-minmax.log2scale


def test_heavy_tails_are_saturated_when_that_lowers_the_error_and_a_lone_outlier_is_not():
    heavy = np.random.default_rng(0).laplace(0.0, 0.05, 20000)  # trained conv weights look like this
    minmax, mse = choose("minmax", heavy, 8, pow2=True), choose("mse", heavy, 8, pow2=True)
    assert mse.log2scale > minmax.log2scale and 0 < mse.saturated_fraction < 0.01
    assert pow2_error(heavy, mse.log2scale, 8) < pow2_error(heavy, minmax.log2scale, 8)
    # one weight at 355 among a thousand below 0.5: clipping it costs more than the small ones' rounding
    # (the ssd_mbv2 depthwise case is equalization's to solve, not the threshold's)
    lone = np.random.default_rng(0).uniform(-0.5, 0.5, 1000)
    lone[7] = 355.0
    assert choose("mse", lone, 8, pow2=True) == choose("minmax", lone, 8, pow2=True)


def test_every_weight_method_is_a_config_choice():
    from pipeline.config import WeightMethod

    assert {method.value for method in WeightMethod} == set(weight_methods()) == {"minmax", "mse"}


def test_mse_weighed_by_input_channel_power_minimizes_the_layer_output_error_it_measures():
    """A dense layer whose largest weights read an input channel that is nearly silent: clipping
    them costs the output almost nothing, so mse by output error takes a finer scale than mse by
    weight error, and the output error measured on the data is lower for it."""
    from core.quantize.calibration.bias_correction import channel_response
    from core.quantize.calibration.weights import pow2_quantized

    rng = np.random.default_rng(5)
    inputs = rng.normal(0.0, 1.0, size=(4096, 8)) * np.array([1.0] * 7 + [1e-3])
    weight = rng.normal(0.0, 0.05, size=(8, 16))
    weight[7] = rng.normal(0.0, 2.0, size=16)  # the silent channel's row holds the largest weights
    layer = type("Dense", (), {"op": "conv"})()  # channel_response reads only the op; a 2-d weight is dense
    mean_square = np.mean(inputs**2, axis=0)
    by_output = choose("mse", weight, 8, pow2=True, weigh=lambda squared: float(channel_response(layer, squared, mean_square).sum()))
    by_weight = choose("mse", weight, 8, pow2=True)
    assert by_output.log2scale > by_weight.log2scale

    def output_error(log2scale):
        return float(np.mean((inputs @ (pow2_quantized(weight, log2scale, 8) - weight)) ** 2))

    minmax = choose("minmax", weight, 8, pow2=True)
    candidates = range(minmax.log2scale, minmax.log2scale + 5)  # mse's: unsaturated to 4 bits finer
    assert output_error(by_output.log2scale) < output_error(by_weight.log2scale)
    assert output_error(by_output.log2scale) <= 1.05 * min(output_error(k) for k in candidates)
