"""TFLite's 16x8 mode (`target=tflite_int16x8`, core/quantize/schemes/tflite_int16x8.py) as TensorFlow's converter
quantizes it: int16 symmetric activations, int8 per-channel weights, int64 biases, softmax at 1/32768; calibrate and
annotate run it on a real model, and a run past annotate is refused before any stage (its IR is not built yet)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from rich.console import Console

from conftest import compose
from core.quantize.schemes import TfliteInt16x8, TfliteInt8
from core.quantize.table import CalibrationTable
from pipeline.config import ConfigError
from pipeline.main import run_pipeline

QUIET = Console(file=open("/dev/null", "w"))


def _converted_16x8(images: np.ndarray) -> tuple[tf.keras.Model, Interpreter]:
    """A small Keras classifier and TensorFlow's converter's 16x8 file for it, calibrated on `images`."""
    tf.keras.utils.set_random_seed(0)
    inputs = tf.keras.Input((8, 8, 3), name="images")
    x = tf.keras.layers.Conv2D(6, 3, activation="relu", name="conv")(inputs)
    x = tf.keras.layers.Flatten()(x)
    outputs = tf.keras.layers.Dense(5, activation="softmax", name="scores")(x)
    model = tf.keras.Model(inputs, outputs)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([image[np.newaxis]] for image in images)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int16
    return model, Interpreter(model_content=converter.convert())


def test_the_scheme_quantizes_as_the_converters_16x8_mode():
    images = np.random.default_rng(0).uniform(-1.5, 2.0, (16, 8, 8, 3)).astype(np.float32)
    model, interpreter = _converted_16x8(images)
    details = interpreter.get_tensor_details()
    scheme = TfliteInt16x8()
    activations = [d for d in details if d["dtype"] == np.int16]
    assert activations and all(int(d["quantization_parameters"]["zero_points"][0]) == 0 for d in activations)
    # the input: symmetric over what the representative data span, as our affine range of the same span
    (first,), (softmax,) = interpreter.get_input_details(), interpreter.get_output_details()
    scale, zero_point, _ = scheme.affine(float(images.min()), float(images.max()))
    assert first["dtype"] == np.int16 and zero_point == 0 and first["quantization"][0] == pytest.approx(scale, rel=1e-6)
    # the softmax output: the scale TFLite's int16 kernel requires, as the scheme fixes it
    assert (softmax["quantization"][0], softmax["quantization"][1]) == pytest.approx(scheme.fixed_outputs["Softmax"])
    # weights int8 per output channel, scale max|w| / 127; biases int64
    kernel = model.get_layer("conv").kernel.numpy()
    weights = next(d for d in details if d["dtype"] == np.int8 and len(d["shape"]) == 4)
    ours = scheme.weight_entry("conv", kernel, lambda: [kernel[..., c] for c in range(kernel.shape[-1])], "minmax", np.mean)
    assert ours.bits == 8 and ours.narrow_range
    np.testing.assert_allclose(weights["quantization_parameters"]["scales"], ours.channel_scales, rtol=1e-6)
    assert {d["dtype"] for d in details if len(d["shape"]) == 1 and d["shape"][0] in (5, 6)} == {np.int64}


def test_its_activations_are_16_bit_symmetric_its_weights_the_int8_schemes():
    scheme, int8 = TfliteInt16x8(), TfliteInt8()
    assert (scheme.qmin, scheme.qmax, scheme.weight_bits, scheme.bias_bits) == (-32768, 32767, 8, 64)
    scale, zero_point, quant_range = scheme.affine(-1.0, 3.0)
    assert (scale, zero_point) == (3.0 / 32767, 0) and quant_range == [-32768 * scale, 32767 * scale]
    weight = np.random.default_rng(1).normal(size=(3, 3, 4, 8)).astype(np.float32)
    channels = lambda: [weight[..., c] for c in range(8)]  # noqa: E731
    ours, theirs = (s.weight_entry("w", weight, channels, "minmax", np.mean) for s in (scheme, int8))
    assert ours.channel_scales == theirs.channel_scales and ours.range == theirs.range and (ours.bits, theirs.bits) == (8, None)


@pytest.fixture(scope="module")
def digits_runs(tmp_path_factory, model_cache):
    root = tmp_path_factory.mktemp("int16x8")
    store = [f"store.url={root / 'store'}", f"store.cache_dir={model_cache}", f"tracking_uri=sqlite:///{root / 'mlflow.db'}"]
    return {target: run_pipeline(compose(*store, f"target={target}", "until=annotate"), console=QUIET)
            for target in ("tflite_int8", "tflite_int16x8")}


def test_calibrate_and_annotate_run_it_and_16_bit_activations_cost_less_than_8(digits_runs):
    summary = digits_runs["tflite_int16x8"]
    table = CalibrationTable.load(summary.results[-2].artifact.directory)
    assert table.bits == 16
    for name, entry in table.tensors.items():
        if entry.kind in ("input", "activation"):
            assert entry.zero_point == 0 and entry.range[1] == pytest.approx(32767 * entry.scale), name
        if entry.kind == "weight":
            assert table.bits_of(entry) == 8 and entry.narrow_range, name
    sqnr = {target: run.results[-1].metrics["sqnr_db_min"] for target, run in digits_runs.items()}
    assert sqnr["tflite_int16x8"] > sqnr["tflite_int8"] + 3, sqnr


def test_a_run_past_annotate_is_refused_before_any_stage_naming_until():
    with pytest.raises(ConfigError, match=r"target/scheme=tflite_int16x8: its IR, simulator and C are not built yet.*until=annotate"):
        compose("target=tflite_int16x8")
    with pytest.raises(ConfigError, match=r"scheme='tflite_int16x8': an accelerator runs pow2_symmetric or tflite_int8"):
        compose("target=accel_tflite", "target/scheme=tflite_int16x8", "until=annotate")
    assert compose("target=tflite_int16x8", "until=annotate").target.scheme.bits == 16
