"""The calibration math of core/calibration: streaming histograms, threshold methods, scales."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from core.quantize.calibration import (METHODS, CalibrationDataError, CalibrationSettings, TensorStatistics,
                              get_method, register_method)
from core.quantize.calibration.histogram import histogram_of_magnitudes, rebin, rebin_reference
from core.quantize.calibration.methods.base import ThresholdMethod
from core.quantize.calibration.methods.kl import kl_divergences, kl_threshold_bin
from core.quantize.calibration.methods.kl_reference import (expand, kl_divergences_reference,
                                                   kl_threshold_bin_reference, quantize)
from core.quantize.calibration.methods.mse import expected_squared_error
from core.quantize.calibration.methods.percentile import percentile_from_histogram
from core.quantize.calibration.methods.qat import MissingFakeQuantRange
from core.quantize.calibration.scales import (float_scale, log2scale, per_channel_absmax, qat_log2scale,
                                     zero_tensor_log2scale)

SETTINGS = CalibrationSettings()
slow = settings(deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])


def stats_of(*batches, num_bins=2048) -> TensorStatistics:
    stats = TensorStatistics(num_bins)
    for batch in batches:
        stats.update(batch)
    return stats


def one_shot_counts(batches, absmax, num_bins=2048) -> np.ndarray:
    everything = np.concatenate([np.abs(np.asarray(b, dtype=np.float64)).ravel() for b in batches])
    return histogram_of_magnitudes(everything, absmax, num_bins)


# Realistic activations: the histograms every KL check runs on.
def realistic_tensors(seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    relu6 = np.clip(rng.normal(0.5, 2.0, (16, 32, 32, 8)), 0, 6)  # spikes at 0 and at 6
    sparse = rng.standard_normal((16, 4096)) * (rng.random((16, 4096)) < 0.01)
    return {
        "half_normal": rng.standard_normal((16, 32, 32, 8)),
        "exponential": rng.exponential(0.7, (16, 4096)),
        "relu6": relu6,
        "sparse": sparse,
        "coarse": np.round(rng.standard_normal((8, 4096)) * 4) / 4,  # many empty bins between levels
        "outlier_absmax": np.concatenate([rng.standard_normal(200_000), [40.0]]),
        "uniform": rng.uniform(-3, 3, (8, 4096)),
        "tiny": rng.standard_normal(300),
    }


REALISTIC = realistic_tensors()


def measured_squared_error(values: np.ndarray, threshold: float, num_levels: int = 128) -> float:
    """Squared error of a symmetric quantizer with step threshold / num_levels, clipped to +-T."""
    step = threshold / num_levels
    quantized = np.clip(np.round(values / step) * step, -threshold, threshold)
    return float(np.sum((values - quantized) ** 2))


# ----------------------------------------------------------------------------- TensorStatistics

def test_one_batch_is_a_plain_histogram():
    batch = REALISTIC["half_normal"]
    stats = stats_of(batch)
    assert stats.count == batch.size
    assert stats.min == batch.min() and stats.max == batch.max()
    assert stats.absmax == np.abs(batch).max()
    np.testing.assert_array_equal(stats.counts, one_shot_counts([batch], stats.absmax))
    assert stats.counts[-1] >= 1  # absmax lies in the last bin


batches_strategy = st.lists(
    st.tuples(st.floats(1e-3, 1e3),
              hnp.arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 300)),
                         elements=st.floats(-1, 1, allow_subnormal=False))),
    min_size=1, max_size=6)


@settings(max_examples=400, deadline=None)
@given(counts=hnp.arrays(np.float64, st.sampled_from([1, 2, 5, 2048]),
                         elements=st.one_of(st.just(0.0), st.floats(0, 1e12, allow_subnormal=False))),
       old_absmax=st.one_of(st.floats(1e-320, 1e-300), st.floats(1e-6, 1e6)),
       growth=st.one_of(st.just(1.0), st.floats(1.0, 1.0 + 1e-9), st.floats(1.0, 50.0)))
def test_the_compiled_rebin_gives_numpys_bits(counts, old_absmax, growth):
    """The merge's re-binning, compiled, against numpy's cumsum / linspace / interp / diff: the same
    float64 values bit for bit (subnormal ranges included, where the compiled path defers to numpy)."""
    new_absmax = old_absmax * growth
    assert rebin(counts, old_absmax, new_absmax).tobytes() == rebin_reference(counts, old_absmax, new_absmax).tobytes()


def test_a_range_near_the_smallest_normal_float_keeps_every_count_finite():
    """Found by hypothesis: two batches of one value each, 189 and 665 times the smallest normal float64. The merge's
    slopes (a count over a bin 2^-1030 wide) overflowed to inf and the histogram held inf counts."""
    stats = TensorStatistics()
    for factor in (189.0, 665.0):
        stats.update(np.array([[factor * np.finfo(np.float64).tiny]]))
    assert np.isfinite(stats.counts).all() and stats.counts.sum() == 2.0
    assert stats.counts[-1] == 1.0  # the larger value at the range's end; the smaller split between the bins it spans
    first = TensorStatistics().update(np.array([[1e-310]]))
    assert first.merge(TensorStatistics().update(np.array([[1e300]]))).counts[0] == 1.0  # the old range inside bin 0


@settings(deadline=None, max_examples=400)
@given(counts=hnp.arrays(np.float64, st.sampled_from([1, 5, 2048]), elements=st.floats(0, 1e12, allow_subnormal=False)),
       old_absmax=st.floats(1e-250, 1e250), growth=st.floats(1.0, 1e6), power=st.integers(-60, 60))
def test_rebinning_is_the_same_under_a_power_of_two_scaling_of_both_ranges(counts, old_absmax, growth, power):
    """What lets the merge compute on scaled ranges: the split of each old bin depends on the ranges' ratio only."""
    new_absmax = old_absmax * growth
    assert rebin(counts, old_absmax, new_absmax).tobytes() == rebin(counts, math.ldexp(old_absmax, power),
                                                                      math.ldexp(new_absmax, power)).tobytes()


@settings(deadline=None, max_examples=60)
@given(batches_strategy)
def test_rebinning_preserves_counts_and_stays_close_to_one_shot(scaled_batches):
    batches = [scale * values for scale, values in scaled_batches]
    stats = TensorStatistics()
    rebinnings = 0
    for batch in batches:
        before = stats.absmax
        stats.update(batch)
        rebinnings += before > 0 and stats.absmax > before
    total = sum(b.size for b in batches)
    assert stats.count == total
    assert stats.counts.shape == (2048,)
    assert stats.counts.sum() == pytest.approx(total, rel=1e-9)
    if stats.absmax == 0:
        return
    # Each re-binning moves a value's mass by less than one (final) bin: the cumulative counts
    # are sandwiched between the one-shot ones shifted by rebinnings + 2 bins.
    stream = np.concatenate(([0.0], np.cumsum(stats.counts)))
    one_shot = np.concatenate(([0.0], np.cumsum(one_shot_counts(batches, stats.absmax))))
    shift = rebinnings + 2
    edges = np.arange(2049)
    lower = one_shot[np.clip(edges - shift, 0, 2048)]
    upper = one_shot[np.clip(edges + shift, 0, 2048)]
    slack = 1e-9 * total
    assert np.all(stream >= lower - slack) and np.all(stream <= upper + slack)


def test_streaming_histogram_is_close_to_one_shot_on_realistic_batches():
    rng = np.random.default_rng(3)
    batches = [rng.standard_normal((32, 4096)) * (1 + 0.02 * k) for k in range(16)]  # absmax keeps rising
    stats = stats_of(*batches)
    one_shot = one_shot_counts(batches, stats.absmax)
    mean_displacement_in_bins = np.abs(np.cumsum(stats.counts) - np.cumsum(one_shot)).sum() / one_shot.sum()
    assert mean_displacement_in_bins < 0.05
    assert kl_threshold_bin(stats.counts) == pytest.approx(kl_threshold_bin(one_shot), abs=16)


def test_merge_equals_streaming_everything():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((8, 1000)), 3 * rng.standard_normal((8, 1000))
    merged = stats_of(a).merge(stats_of(b))
    together = stats_of(a, b)
    assert (merged.count, merged.min, merged.max, merged.absmax) == (
        together.count, together.min, together.max, together.absmax)
    np.testing.assert_allclose(merged.counts, together.counts, atol=1e-9)
    assert stats_of(a).merge(TensorStatistics()).counts.sum() == a.size
    with pytest.raises(ValueError, match="bins"):
        stats_of(a).merge(TensorStatistics(num_bins=64))


def test_to_dict_from_dict_round_trip():
    stats = stats_of(REALISTIC["relu6"])
    scalars = json.loads(json.dumps(stats.to_dict()))
    restored = TensorStatistics.from_dict(scalars, stats.counts)
    assert restored.to_dict() == stats.to_dict()
    np.testing.assert_array_equal(restored.counts, stats.counts)
    empty = TensorStatistics.from_dict(json.loads(json.dumps(TensorStatistics().to_dict())), np.zeros(2048))
    assert empty.count == 0 and empty.to_dict()["min"] is None
    with pytest.raises(ValueError, match="shape"):
        TensorStatistics.from_dict(scalars, np.zeros(10))


def test_nan_and_inf_raise_with_the_image_index():
    stats = stats_of(np.ones((2, 3)))
    batch = np.zeros((4, 3, 3), dtype=np.float32)
    batch[2, 1, 1] = np.nan
    batch[3, 0, 0] = -np.inf
    with pytest.raises(CalibrationDataError) as raised:
        stats.update(batch)
    assert raised.value.num_bad == 2 and raised.value.first_index == 2
    assert "2 non-finite" in str(raised.value) and "item 2" in str(raised.value)
    assert isinstance(raised.value, ValueError)
    assert stats.count == 6 and stats.absmax == 1.0  # unchanged


def test_all_zero_tensor_is_valid_and_gets_a_defined_scale_with_a_warning():
    stats = stats_of(np.zeros((4, 8, 8)))
    assert (stats.absmax, stats.count, stats.counts[0], stats.bin_width) == (0.0, 256, 256, 0.0)
    for name in ("minmax", "kl", "percentile", "mse"):
        threshold = get_method(name).threshold(stats, SETTINGS)
        assert threshold == 0.0
        for rounding in ("ceil", "nearest", "mse"):
            chosen = log2scale(threshold, rounding=rounding, stats=stats)
            assert chosen.log2scale == zero_tensor_log2scale(8) == 7
            assert chosen.warning and "all-zero" in chosen.warning
    assert float_scale(0.0) == 1.0
    # Zeros seen before a nonzero batch stay at 0.
    stats.update(np.full((1, 4), 2.0))
    assert stats.counts[0] == 256 and stats.counts[-1] == 4


def test_empty_batch_is_ignored_and_unobserved_tensor_is_an_error():
    stats = stats_of(np.zeros((0, 3)))
    assert stats.count == 0
    with pytest.raises(ValueError, match="no observed values"):
        get_method("kl").threshold(stats, SETTINGS)


def test_tiny_absmax_does_not_overflow_the_binning():
    stats = stats_of(np.array([1e-307, 5e-308, 0.0]))
    assert stats.counts[-1] == 1 and stats.counts[1024] == 1 and stats.counts[0] == 1


# ----------------------------------------------------------------------------- registry

def test_registry_matches_the_config_choices():
    from core.quantize.auto import AUTO
    from pipeline.config import CalibMethod

    assert set(METHODS) | {AUTO} == {m.value for m in CalibMethod}
    for name, cls in METHODS.items():
        assert cls.name == name and isinstance(get_method(name), ThresholdMethod)


def test_unknown_method_lists_the_choices():
    with pytest.raises(ValueError, match=r"'kll'.*kl, minmax, mse, percentile, qat"):
        get_method("kll")


def test_register_method_rejects_duplicates_and_nameless_classes():
    class Another(ThresholdMethod):
        name = "kl"

        def threshold(self, stats, settings):
            return 0.0

    with pytest.raises(ValueError, match="two threshold methods named 'kl'"):
        register_method(Another)

    class Nameless(ThresholdMethod):
        def threshold(self, stats, settings):
            return 0.0

    with pytest.raises(TypeError, match="name"):
        register_method(Nameless)


def test_settings_are_validated():
    with pytest.raises(ValueError, match="percentile"):
        CalibrationSettings(options={"percentile": 0})
    with pytest.raises(ValueError, match="num_quant_levels"):
        CalibrationSettings(num_quant_levels=0)


# ----------------------------------------------------------------------------- minmax

@given(hnp.arrays(np.float32, st.integers(1, 200), elements=st.floats(-1e4, 1e4, width=32)))
def test_minmax_is_absmax(values):
    stats = stats_of(values)
    assert get_method("minmax").threshold(stats, SETTINGS) == float(np.max(np.abs(values)))


# ----------------------------------------------------------------------------- KL

def test_quantize_and_expand_follow_the_seed_example():
    bins = np.array([1, 0, 2, 3, 5, 3, 1, 7], dtype=float)
    assert quantize(bins, 2).tolist() == [6, 16]
    assert expand(quantize(bins, 2), bins != 0).tolist() == [2, 0, 2, 2, 4, 4, 4, 4]
    # 10 bins into 3 levels: groups of 10 // 3 = 3, the last takes the remaining 4.
    assert quantize(np.arange(10.0), 3).tolist() == [3, 12, 30]


def assert_fast_kl_matches_reference(counts, num_levels=128):
    fast = kl_divergences(counts, num_levels)
    reference = kl_divergences_reference(counts, num_levels)
    np.testing.assert_array_equal(np.isinf(fast), np.isinf(reference))
    finite = np.isfinite(reference)
    np.testing.assert_allclose(fast[finite], reference[finite], rtol=1e-9, atol=1e-10)
    assert kl_threshold_bin(counts, num_levels) == kl_threshold_bin_reference(counts, num_levels)


@pytest.mark.parametrize("name", sorted(REALISTIC))
def test_fast_kl_picks_the_reference_bin_on_realistic_histograms(name):
    stats = stats_of(REALISTIC[name])
    assert_fast_kl_matches_reference(stats.counts)


def test_fast_kl_matches_reference_on_streamed_fractional_counts():
    rng = np.random.default_rng(5)
    stats = stats_of(*[rng.exponential(1, (4, 5000)) * (1 + 0.1 * k) for k in range(6)])
    assert not np.all(stats.counts == np.round(stats.counts))  # re-binning made them fractional
    assert_fast_kl_matches_reference(stats.counts)


def random_histograms(max_bins):
    sparse_counts = st.integers(0, 10**6).map(lambda c: c if c % 3 == 0 else 0)  # 2/3 empty
    return st.one_of(
        hnp.arrays(np.float64, st.integers(1, max_bins), elements=st.integers(0, 50).map(float)),
        hnp.arrays(np.float64, st.integers(1, max_bins), elements=sparse_counts.map(float)),
        # Fractional counts, as re-binning makes them (down to tiny slivers of a split bin).
        hnp.arrays(np.float64, st.integers(1, max_bins), elements=st.just(0.0) | st.floats(1e-9, 1e6)),
    )


@slow
@given(random_histograms(600), st.sampled_from([1, 4, 16, 128]))
def test_fast_kl_matches_reference_on_random_histograms(counts, num_levels):
    assert_fast_kl_matches_reference(counts, num_levels)


@settings(deadline=None, max_examples=8)
@given(st.integers(0, 2**32 - 1), st.floats(0.001, 0.5))
def test_fast_kl_matches_reference_on_sparse_2048_bin_histograms(seed, density):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 1000, 2048) * (rng.random(2048) < density)
    counts[-1] = max(counts[-1], 1)  # absmax is in the last bin
    assert_fast_kl_matches_reference(counts.astype(float))


def test_kl_clips_a_far_outlier():
    stats = stats_of(REALISTIC["outlier_absmax"])
    threshold = get_method("kl").threshold(stats, SETTINGS)
    assert threshold < 0.2 * stats.absmax
    assert threshold > 2.0  # but keeps the bulk of the Gaussian


def test_kl_threshold_is_the_centre_of_the_chosen_bin():
    stats = stats_of(REALISTIC["exponential"])
    bin_index = kl_threshold_bin(stats.counts)
    assert get_method("kl").threshold(stats, SETTINGS) == pytest.approx((bin_index + 0.5) * stats.bin_width)
    assert 128 <= bin_index < 2048


def test_kl_with_no_candidates_is_minmax():
    stats = stats_of(REALISTIC["half_normal"], num_bins=128)
    assert get_method("kl").threshold(stats, SETTINGS) == stats.absmax


# ----------------------------------------------------------------------------- percentile

@settings(deadline=None, max_examples=60)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["normal", "exponential", "relu"]),
       st.integers(10, 20_000), st.floats(1, 100))
def test_percentile_is_within_a_bin_of_np_percentile(seed, family, size, percentile):
    rng = np.random.default_rng(seed)
    values = {"normal": rng.standard_normal(size), "exponential": rng.exponential(1, size),
              "relu": np.maximum(rng.standard_normal(size), 0)}[family]
    stats = stats_of(values)
    threshold = get_method("percentile").threshold(stats, CalibrationSettings(options={"percentile": percentile}))
    magnitudes = np.sort(np.abs(values))
    rank = (size - 1) * percentile / 100
    low, high = magnitudes[math.floor(rank)], magnitudes[math.ceil(rank)]
    width = stats.bin_width
    # Within a bin of the order statistics np.percentile interpolates between...
    assert low - width * (1 + 1e-9) <= threshold <= high + width * (1 + 1e-9)
    # ...hence within a bin of np.percentile itself where the data are dense.
    if high - low < 1e-3 * width:
        assert abs(threshold - np.percentile(magnitudes, percentile)) <= width * (1 + 1e-6)


def test_percentile_on_a_dense_tensor():
    values = REALISTIC["half_normal"]
    stats = stats_of(values)
    for percentile in (50, 99, 99.9, 99.99):
        threshold = get_method("percentile").threshold(stats, CalibrationSettings(options={"percentile": percentile}))
        assert abs(threshold - np.percentile(np.abs(values), percentile)) <= stats.bin_width


def test_percentile_from_histogram_interpolates_inside_a_bin():
    counts = np.array([0, 4, 0, 0], dtype=float)  # 4 values spread over [1, 2)
    assert percentile_from_histogram(counts, 1.0, 50) == pytest.approx(1.5)
    assert percentile_from_histogram(counts, 1.0, 100) == pytest.approx(1.875)


# ----------------------------------------------------------------------------- mse

def brute_force_expected_error(counts, bin_width, threshold, num_levels, samples=20_001):
    """The mse model integrated numerically: uniform values per bin, clipping exact,
    rounding step^2 / 12 per value inside."""
    step = threshold / num_levels
    error = 0.0
    for k, count in enumerate(counts):
        x = (k + (np.arange(samples) + 0.5) / samples) * bin_width
        per_value = np.where(x > threshold, (x - threshold) ** 2, step ** 2 / 12)
        error += count * per_value.mean()
    return error


@pytest.mark.parametrize("threshold", [0.0, 0.3, 1.0, 2.5, 2.999, 3.7, 4.0, 9.0])
def test_expected_squared_error_is_the_documented_model(threshold):
    counts = np.array([5.0, 0.0, 3.0, 1.0])
    model = expected_squared_error(counts, 1.0, np.array([threshold]), 8)[0]
    assert model == pytest.approx(brute_force_expected_error(counts, 1.0, threshold, 8), rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("name", ["half_normal", "exponential", "relu6", "outlier_absmax", "uniform"])
def test_mse_threshold_beats_minmax_and_a_worse_threshold_on_the_raw_data(name):
    values = REALISTIC[name].ravel()
    stats = stats_of(values)
    threshold = get_method("mse").threshold(stats, SETTINGS)
    error = measured_squared_error(values, threshold)
    assert 0 < threshold <= stats.absmax
    assert error <= measured_squared_error(values, stats.absmax) * (1 + 1e-3)
    assert error < measured_squared_error(values, threshold / 4)
    assert error < measured_squared_error(values, 1.5 * threshold) or threshold == stats.absmax


def test_mse_balances_a_far_outlier_against_rounding():
    # One value at 40 among n Gaussians: (40 - T)^2 + n (T / 128)^2 / 12 is least at
    # T = 40 / (1 + n / (12 * 128^2)), about 19.8 (the bulk, within 4.6, is never clipped).
    stats = stats_of(REALISTIC["outlier_absmax"])
    expected = 40 / (1 + (stats.count - 1) / (12 * 128 ** 2))
    assert get_method("mse").threshold(stats, SETTINGS) == pytest.approx(expected, abs=2 * stats.bin_width)


# ----------------------------------------------------------------------------- qat

def test_qat_needs_a_fake_quant_range():
    stats = stats_of(REALISTIC["tiny"])
    with pytest.raises(MissingFakeQuantRange, match="FakeQuant"):
        get_method("qat").threshold(stats, SETTINGS)
    with_range = dataclasses.replace(SETTINGS, fake_quant_range=(-8.0, 7.9375))
    threshold = get_method("qat").threshold(stats, with_range)
    assert threshold == 8.0
    assert log2scale(threshold).log2scale == qat_log2scale(-8.0, 7.9375) == 4
    with pytest.raises(ValueError, match="does not contain 0"):
        get_method("qat").threshold(stats, dataclasses.replace(SETTINGS, fake_quant_range=(1.0, 2.0)))


# ----------------------------------------------------------------------------- scales

@pytest.mark.parametrize("threshold, rounding, expected", [
    (4.0, "ceil", 5), (4.0, "nearest", 5),
    (7.9375, "ceil", 4), (7.9375, "nearest", 4),
    (8.0, "ceil", 4), (4.0001, "ceil", 4), (4.0001, "nearest", 5),
    (5.0, "nearest", 5), (6.0, "nearest", 4), (1.0, "ceil", 7), (0.75, "ceil", 7),
    (0.5, "ceil", 8), (300.0, "ceil", -2), (2.0 ** -20, "ceil", 27),
])
def test_log2scale_examples(threshold, rounding, expected):
    chosen = log2scale(threshold, rounding=rounding)
    assert chosen == (expected, None)


def test_log2scale_other_bits():
    assert log2scale(1.0, bits=16).log2scale == 15
    assert log2scale(4.0, bits=4).log2scale == 1


@given(st.floats(1e-30, 1e30))
def test_ceil_log2scale_never_clips_and_is_tight(threshold):
    k = 7 - log2scale(threshold).log2scale
    assert 2.0 ** k >= threshold > 2.0 ** (k - 1)


def test_log2scale_mse_chooses_by_expected_error():
    rng = np.random.default_rng(6)
    # Bulk within 1, one far value at 4.1: range 4 (clip 0.1 once, half the step) beats range 8.
    outlier = np.concatenate([rng.standard_normal(100_000) * 0.3, [4.1]])
    stats = stats_of(outlier)
    assert log2scale(stats.absmax, rounding="mse", stats=stats).log2scale == 5
    # Uniform up to 7.9: range 4 would clip half the values; 8 wins.
    spread = rng.uniform(-7.9, 7.9, 100_000)
    stats = stats_of(spread)
    assert log2scale(stats.absmax, rounding="mse", stats=stats).log2scale == 4
    # The choice agrees with the error measured on the raw data.
    for values in (outlier, spread):
        stats = stats_of(values)
        chosen = 7 - log2scale(stats.absmax, rounding="mse", stats=stats).log2scale
        other = ({7 - log2scale(stats.absmax).log2scale, chosen + 1} - {chosen}).pop()
        assert measured_squared_error(values, 2.0 ** chosen) <= measured_squared_error(values, 2.0 ** other)


def test_log2scale_rejects_bad_input():
    with pytest.raises(ValueError, match="needs the tensor's statistics"):
        log2scale(3.0, rounding="mse")
    with pytest.raises(ValueError, match="choices: ceil, nearest, mse"):
        log2scale(3.0, rounding="floor")
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="threshold"):
            log2scale(bad)


@pytest.mark.parametrize("fq_min, fq_max, expected", [
    (-8.0, 7.9375, 4), (-1.0, 127 / 128, 7), (-128.0, 127.0, 0), (-0.25, 0.25 - 0.25 / 128, 9),
    (float(np.float32(-8.0)), float(np.float32(7.9375)), 4),
])
def test_qat_log2scale(fq_min, fq_max, expected):
    assert qat_log2scale(fq_min, fq_max) == expected


@pytest.mark.parametrize("fq_min, fq_max", [(-8.0, 8.0), (-6.0, 5.953125), (-8.0, 7.0), (0.0, 1.0),
                                            (-7.9375, 7.9375), (math.nan, 1.0)])
def test_qat_log2scale_rejects_non_power_of_two_ranges(fq_min, fq_max):
    with pytest.raises(ValueError, match="not a symmetric power-of-two 8-bit range"):
        qat_log2scale(fq_min, fq_max)


def test_float_scales_and_weight_thresholds():
    assert float_scale(127.0) == 1.0 and float_scale(2.54) == pytest.approx(0.02)
    assert float_scale(1.0, bits=4) == pytest.approx(1 / 7)
    kernel = np.zeros((3, 3, 2, 4))  # HWIO
    kernel[..., 0] = -0.5
    kernel[1, 1, 0, 2] = 2.0
    np.testing.assert_array_equal(per_channel_absmax(kernel, axis=-1), [0.5, 0.0, 2.0, 0.0])
    kernel[0, 0, 1, 1] = np.nan
    with pytest.raises(CalibrationDataError, match="weights"):
        per_channel_absmax(kernel, axis=-1)


def test_kl_ignores_the_zero_spike_of_a_relu6_output():
    """Half the values exactly 0 (a ReLU), the rest spread over (0, 6]: zeros are exact at
    any scale, so the threshold must not collapse toward 0 (it did: T = 0.75 on mbv1)."""
    from core.quantize.calibration.methods import CalibrationSettings, get_method

    rng = np.random.default_rng(0)
    values = np.concatenate([np.zeros(500_000), rng.uniform(0.0, 6.0, 500_000)])
    stats = TensorStatistics().update(values)
    assert get_method("kl").threshold(stats, CalibrationSettings()) > 4.5
