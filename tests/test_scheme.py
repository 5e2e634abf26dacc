"""The quantization schemes (core/quantize/schemes/) against independent arithmetic: TensorFlow's
own FakeQuant nudging for TFLite's affine ranges, and the registry against the config's choices."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from hydra.core.config_store import ConfigStore

from core.quantize.schemes import SCHEMES, Pow2Symmetric, TfliteInt8, scheme_of
from pipeline.config import SCHEME_GROUP, register


def test_the_configs_choices_are_the_registered_schemes_each_with_its_own_settings():
    register()
    options = ConfigStore.instance().list(SCHEME_GROUP)
    assert sorted(options) == sorted(f"{name}.yaml" for name in SCHEMES)
    for name, scheme in SCHEMES.items():
        assert scheme.settings().name == name and scheme.settings().bits == scheme().bits


@pytest.mark.parametrize("seed", range(4))
def test_affine_ranges_quantize_as_tensorflows_fake_quant_nudges_them(seed):
    """TensorFlow's FakeQuantWithMinMaxVars nudges [min, max] so zero is an integer, as TFLite's
    converter does; the scheme's scale and zero point must give the same integers."""
    rng = np.random.default_rng(seed)
    scheme = TfliteInt8()
    for _ in range(50):
        low, high = sorted(rng.normal(0, 4, 2))
        low, high = np.float32(min(low, 0.0)), np.float32(max(high, 0.0))
        scale, zero_point, (nudged_low, nudged_high) = scheme.affine(low, high)
        values = np.linspace(low * 1.2 - 1, high * 1.2 + 1, 301, dtype=np.float32)
        fake = tf.quantization.fake_quant_with_min_max_vars(values, low, high, num_bits=8).numpy()
        integers = np.clip(np.floor(values / scale + zero_point + 0.5), -128, 127)
        np.testing.assert_allclose((integers - zero_point) * scale, fake, atol=scale * 1e-3)
        assert -128 <= zero_point <= 127 and nudged_low <= 0.0 <= nudged_high


def test_relu_ranges_use_every_level_and_symmetric_ones_keep_zero_in_the_middle():
    scheme = TfliteInt8()
    assert scheme.affine(0.0, 6.0)[1] == -128 and scheme.affine(0.0, 6.0)[0] == pytest.approx(6.0 / 255)
    assert scheme.affine(-1.0, 1.0)[1] in (-1, 0)
    assert scheme.affine(0.0, 0.0) == (1.0, -128, [0.0, 255.0])  # an all-zero tensor: any scale, zero exact


def test_a_target_config_chooses_its_scheme_with_its_settings():
    settings = {"name": "pow2_symmetric", "bits": 8, "min_log2scale": -4, "max_log2scale": 12, "input_log2scale": None, "max_shift": 20}
    scheme = scheme_of({"name": "t", "scheme": settings}, "nearest")
    assert scheme == Pow2Symmetric(min_log2scale=-4, max_log2scale=12, pow2_rounding="nearest", target="t", max_shift=20)
    assert scheme_of({"name": "t", "scheme": {"name": "tflite_int8", "bits": 8}}) == TfliteInt8()
    with pytest.raises(ValueError, match="target/scheme=int4: .*pow2_symmetric, tflite_int8"):
        scheme_of({"name": "t", "scheme": {"name": "int4"}})
