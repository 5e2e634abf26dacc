"""TFLite's 16x8 mode (`target=tflite_int16x8`, core/quantize/schemes/tflite_int16x8.py) as TensorFlow's converter
quantizes it: int16 symmetric activations, int8 per-channel weights, int64 biases, softmax at 1/32768. Every operator
the converter writes in that mode for the layers the IR takes at 16 bits is computed as both runtimes' interpreters
compute it; a converted 16x8 file and our PTQ of a Keras model run all eight stages bit-exact, on the host (an
accelerator leaves every 16-bit layer to it, saying why); an operator without its 16-bit arithmetic is refused naming it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from ai_edge_litert.interpreter import Interpreter
from rich.console import Console

from conftest import compose, tracking_override
from harness import c_output
from tflite_builder import Tensor, model_bytes, one_operator_model
from core.backends.program import generate_c
from core.frontend.layers import OutputRule
from core.frontend.tflite import TfliteError, read_tflite
from core.ir.ops.lut.int16 import sigmoid_table
from core.ir.tflite_interpreter import run_int8
from core.ir.tflite_ir import ir_of_tflite
from core.quantize.runtimes import RUNTIMES
from core.quantize.schemes import TfliteInt16x8, TfliteInt8
from core.quantize.table import CalibrationTable
from core.quantize.tflite_reference import runner_of
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
    assert (softmax["quantization"][0], softmax["quantization"][1]) == pytest.approx(scheme.fixed_outputs[OutputRule.UNIT_RANGE])
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


def _cnn(activation: str = "relu") -> tf.keras.Model:
    """A small CNN of every layer the IR takes at 16 bits: an explicit pad, convolutions with fused activations, a
    depthwise one, max and average pools, a residual add, a global average (MEAN), a dense layer and a softmax."""
    tf.keras.utils.set_random_seed(1)
    layers = tf.keras.layers
    inputs = tf.keras.Input((12, 12, 3), name="images")
    x = layers.Conv2D(8, 3, strides=2, activation="relu6")(layers.ZeroPadding2D(((1, 0), (1, 0)))(inputs))
    x = layers.MaxPooling2D(2, padding="same")(layers.DepthwiseConv2D(3, padding="same", activation=activation)(x))
    x = layers.AveragePooling2D(2, padding="same")(layers.Add()([x, layers.Conv2D(8, 1)(x)]))
    outputs = layers.Dense(6, activation="softmax")(layers.GlobalAveragePooling2D()(x))
    return tf.keras.Model(inputs, outputs)


def _converted(model: tf.keras.Model, images: np.ndarray, path) -> None:
    """TensorFlow's converter's 16x8 file of `model`, int16 in and out, calibrated on `images`, written to `path`."""
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([image[np.newaxis]] for image in images)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int16
    path.write_bytes(converter.convert())


@pytest.fixture(scope="module")
def cnn_16x8(tmp_path_factory):
    """(the converter's 16x8 file of _cnn, its data as data=arrays reads it)."""
    root = tmp_path_factory.mktemp("cnn16x8")
    rng = np.random.default_rng(2)
    calibration, evaluation = rng.uniform(-1, 2, (32, 12, 12, 3)), rng.uniform(-1, 2, (40, 12, 12, 3))
    _converted(_cnn(), calibration.astype(np.float32), root / "cnn_16x8.tflite")
    np.savez(root / "arrays.npz", calib=calibration.astype(np.float32), eval=evaluation.astype(np.float32))
    return root / "cnn_16x8.tflite", root / "arrays.npz"


@pytest.mark.parametrize("runtime", ["litert_reference", "tflm"])
def test_every_operator_the_converter_writes_in_16x8_is_the_runtimes_integers(cnn_16x8, runtime):
    """Each operator's output, run by the IR's kernels from the runtime's own inputs, is every integer the runtime's
    interpreter computes (LiteRT's reference kernels; TFLite Micro's, whose 16x8 dense layer and softmax tables differ)."""
    path, _ = cnn_16x8
    model = read_tflite(path)
    scale = float(model.tensor(model.inputs[0]).quantization.scale[0])
    inputs = np.clip(np.round(np.random.default_rng(3).uniform(-1.2, 2.2, (6, 12, 12, 3)) / scale), -32768, 32767).astype(np.int16)
    theirs = runner_of(runtime, path).tensors(inputs)
    ours = run_int8(model, inputs, RUNTIMES[runtime])
    assert {operator.name for operator in model.operators} == {"PAD", "CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "ADD",
                                                               "AVERAGE_POOL_2D", "MEAN", "FULLY_CONNECTED", "SOFTMAX"}
    for operator in model.operators:
        output = operator.outputs[0]
        assert ours[output].dtype == np.int16, operator.name
        assert np.array_equal(ours[output].reshape(len(inputs), -1), theirs[output].reshape(len(inputs), -1)), operator.name
    softmax = ours[model.outputs[0]]
    assert softmax.min() >= 0 and np.abs(softmax.astype(np.int64).sum(axis=-1) - 32768).max() < 64  # probabilities at 1/32768


def test_a_16x8_tflite_kept_as_trained_on_an_int8_target_is_refused_before_any_stage(cnn_16x8, tmp_path, model_cache):
    """Its int16 scales cannot be an int8 target's: refused naming the file, the key and both ways out, not stopped by
    the quality guard after calibration."""
    path, arrays = cnn_16x8
    store = [f"store.url={tmp_path / 'store'}", f"store.cache_dir={model_cache}", tracking_override(tmp_path), "pictures=false"]
    with pytest.raises(ConfigError, match=r"16-bit file .*calib.method=qat keeps its scales.*target=tflite_int8's 8-bit .*"
                                          r"choose target=tflite_int16x8 .*or another calib.method"):
        run_pipeline(compose(*store, "model=keras_cifar10", "model.name=cnn16x8", "model.format=tflite", f"model.file.path={path}",
                             "data=arrays", f"data.path={arrays}", "calib.method=qat", "target=tflite_int8"), console=QUIET)


def test_an_int8_tflite_kept_as_trained_on_the_16x8_target_is_refused_before_any_stage(tmp_path, model_cache):
    """The mirror case (round 4: calibrate then failed reading back our own file, "tensor 3 ... is INT16 with zero point
    3"): an int8 file's asymmetric scales are no 16x8 quantization; refused naming the file and both ways out."""
    path = tmp_path / "vector.tflite"
    path.write_bytes(one_operator_model("RELU", [Tensor((1, 8), np.int8, 0.02, 3)], Tensor((1, 8), np.int8, 0.02, 3)))
    samples = np.random.default_rng(0).normal(0, 1, (16, 8)).astype(np.float32)
    np.savez(arrays := tmp_path / "vectors.npz", calib=samples, eval=samples)
    store = [f"store.url={tmp_path / 'store'}", f"store.cache_dir={model_cache}", tracking_override(tmp_path), "pictures=false"]
    with pytest.raises(ConfigError, match=r"vector.tflite is an 8-bit file .*calib.method=qat keeps its scales and zero points, which "
                                          r"target=tflite_int16x8's symmetric int16 activations .*choose target=tflite_int8 .*or another "
                                          r"calib.method"):
        run_pipeline(compose(*store, "model=keras_cifar10", "model.name=vector", "model.format=tflite", f"model.file.path={path}",
                             "data=arrays", f"data.path={arrays}", "calib.method=qat", "target=tflite_int16x8"), console=QUIET)


def test_a_16x8_tflite_runs_all_eight_stages_bit_exact_computing_the_files_integers(cnn_16x8, tmp_path, model_cache):
    path, arrays = cnn_16x8
    store = [f"store.url={tmp_path / 'store'}", f"store.cache_dir={model_cache}", tracking_override(tmp_path), "pictures=false"]
    summary = run_pipeline(compose(*store, "model=keras_cifar10", "model.name=cnn16x8", "model.format=tflite", f"model.file.path={path}",
                                   "model.preprocess.scale=1", "model.preprocess.offset=0", "model.preprocess.resize=none", "data=arrays",
                                   f"data.path={arrays}", "calib.method=qat", "target=tflite_int16x8"), console=QUIET)
    metrics = {result.stage.name: result.metrics for result in summary.results}
    assert metrics["simulate"]["reference_agreement"] == 1 and metrics["codegen"]["bitexact"] == 1
    # the file the IR was read from computes what the user's file computes: its scales are the file's
    emitted = read_tflite(next(result for result in summary.results if result.stage.name == "emit_ir").artifact.directory / "model.tflite")
    original = read_tflite(path)
    scales = lambda model: {float(t.quantization.scale[0]) for t in model.tensors if t.dtype == "INT16"}  # noqa: E731
    assert scales(emitted) == scales(original)
    inputs = np.random.default_rng(4).integers(-9000, 9000, (5, 12, 12, 3)).astype(np.int16)
    outputs = [runner_of("litert_reference", file).tensors(inputs)[model.outputs[0]] for file, model in
               ((path, original), (emitted.path, emitted))]
    assert np.array_equal(*outputs)


def _data_movement_model() -> tf.keras.Model:
    """A crop, nearest-neighbour and bilinear upsamplings joined along the channels, and a permutation of height and
    width, between convolutions."""
    tf.keras.utils.set_random_seed(3)
    layers = tf.keras.layers
    inputs = tf.keras.Input((10, 10, 3))
    x = layers.Cropping2D(((1, 2), (2, 1)))(layers.Conv2D(6, 3, padding="same", activation="relu")(inputs))
    x = layers.Concatenate()([layers.UpSampling2D(2, interpolation="nearest")(x), layers.UpSampling2D(2, interpolation="bilinear")(x)])
    x = layers.Permute((2, 1, 3))(x)
    x = layers.Conv2D(4, 3, strides=2, activation="relu")(x)
    return tf.keras.Model(inputs, layers.Dense(5)(layers.Flatten()(x)))


def test_crop_upsampling_concatenation_and_permute_run_all_eight_stages_at_16x8_bit_exact(tmp_path, model_cache):
    """STRIDED_SLICE, RESIZE_NEAREST_NEIGHBOR, CONCATENATION and TRANSPOSE (copies of their input's integers) and
    RESIZE_BILINEAR written at int16, computed by LiteRT's reference kernels as by ours and by the generated C."""
    model = _data_movement_model()
    model.save(path := tmp_path / "moves.keras")
    rng = np.random.default_rng(6)
    np.savez(arrays := tmp_path / "moves.npz", calib=rng.normal(0, 1, (32, 10, 10, 3)).astype(np.float32),
             eval=rng.normal(0, 1, (8, 10, 10, 3)).astype(np.float32))
    store = [f"store.url={tmp_path / 'store'}", f"store.cache_dir={model_cache}", tracking_override(tmp_path), "pictures=false"]
    common = [*store, "model=keras_cifar10", "model.name=moves", "model.format=keras", f"model.file.path={path}", "data=arrays",
              f"data.path={arrays}", "calib.method=minmax"]
    summary = run_pipeline(compose(*common, "target=tflite_int16x8"), console=QUIET)
    metrics = {result.stage.name: result.metrics for result in summary.results}
    assert metrics["simulate"]["reference_agreement"] == 1 and metrics["codegen"]["bitexact"] == 1
    emitted = read_tflite(next(result for result in summary.results if result.stage.name == "emit_ir").artifact.directory / "model.tflite")
    operators = {operator.name for operator in emitted.operators}
    assert {"STRIDED_SLICE", "RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR", "CONCATENATION", "TRANSPOSE"} <= operators, operators
    assert {tensor.dtype for tensor in emitted.tensors if tensor.index in emitted.inputs + emitted.outputs} == {"INT16"}
    int8 = run_pipeline(compose(*common, "target=tflite_int8", "until=annotate"), console=QUIET).results[3].metrics
    assert metrics["annotate"]["sqnr_db_min"] > int8["sqnr_db_min"] + 3, (metrics["annotate"], int8)  # int16 activations keep more


@pytest.fixture(scope="module")
def digits_runs(tmp_path_factory, model_cache):
    root = tmp_path_factory.mktemp("int16x8")
    store = [f"store.url={root / 'store'}", f"store.cache_dir={model_cache}", tracking_override(root), "pictures=false"]
    runs = {"tflite_int8": ("target=tflite_int8", "until=annotate"), "tflite_int16x8": ("target=tflite_int16x8",),
            "tflm": ("target=tflite_int16x8", "target.scheme.runtime=tflm", "until=simulate"),
            "accel": ("target=accel_tflite", "target/scheme=tflite_int16x8")}
    return {name: run_pipeline(compose(*store, *overrides), console=QUIET) for name, overrides in runs.items()}


def test_the_default_model_runs_all_eight_stages_at_16x8_with_16_bits_costing_less_than_8(digits_runs):
    summary = digits_runs["tflite_int16x8"]
    metrics = {result.stage.name: result.metrics for result in summary.results}
    assert metrics["simulate"]["reference_agreement"] == 1 and metrics["codegen"]["bitexact"] == 1
    table = CalibrationTable.load(summary.results[2].artifact.directory)
    assert table.bits == 16
    for name, entry in table.tensors.items():
        if entry.kind in ("input", "activation"):
            assert entry.zero_point == 0 and entry.range[1] == pytest.approx(32767 * entry.scale), name
        if entry.kind == "weight":
            assert table.bits_of(entry) == 8 and entry.narrow_range, name
    sqnr = {target: run.results[3].metrics["sqnr_db_min"] for target, run in digits_runs.items() if target != "accel"}
    assert sqnr["tflite_int16x8"] > sqnr["tflite_int8"] + 3, sqnr
    assert metrics["simulate"]["sqnr_db_min"] > sqnr["tflite_int8"] + 3  # the integers keep what the fake-quantized graph showed
    # TFLite Micro's integers, exact against its interpreter
    assert digits_runs["tflm"].results[-1].metrics["reference_agreement"] == 1


def test_an_accelerator_leaves_16_bit_layers_to_the_host_saying_why(digits_runs):
    summary = digits_runs["accel"]
    metrics = {result.stage.name: result.metrics for result in summary.results}
    assert metrics["partition"]["layers_accel"] == 0 and metrics["codegen"]["bitexact"] == 1
    report = json.loads((next(r for r in summary.results if r.stage.name == "partition").artifact.directory / "report.json").read_text())
    assert report["host_layers"] and all("int16 activations (TFLite's 16x8 mode): the accelerator's buffers, GEMM and ALU hold int8"
                                         in layer["reason"] for layer in report["host_layers"] if layer["operation"] == "conv")


def test_an_operator_without_its_16_bit_arithmetic_is_refused_naming_it(tmp_path):
    path = tmp_path / "hard_swish_16x8.tflite"
    path.write_bytes(one_operator_model("HARD_SWISH", [Tensor((1, 8), np.int16, 1e-3)], Tensor((1, 8), np.int16, 1e-3)))
    with pytest.raises(TfliteError, match=r"operator \d+ \(HARD_SWISH\) on int16 activations \(TFLite's 16x8 mode\): the IR's lut computes "
                                          r"int8 only.*the 16x8 IR covers ADD, AVERAGE_POOL_2D, CONCATENATION, CONV_2D.*LOGISTIC"):
        ir_of_tflite(read_tflite(path))


def test_the_int16_sigmoid_table_is_the_one_litert_interpolates(tmp_path):
    """The 256 entries core/ir/ops/lut/int16.py holds, read back out of LiteRT's int16 TANH: at input scale 1/48 its
    kernel's multiplier is 16384 with a shift of 6, so input i lands on entry i with nothing to interpolate, and the
    output is the entry less 2^15."""
    path = tmp_path / "tanh.tflite"
    path.write_bytes(one_operator_model("TANH", [Tensor((1, 255), np.int16, 1 / 48)], Tensor((1, 255), np.int16, 1 / 32768)))
    read_back = runner_of("litert_reference", path).tensors(np.arange(255, dtype=np.int16)[None])[read_tflite(path).outputs[0]]
    np.testing.assert_array_equal(read_back.reshape(-1).astype(np.int64) + 32768, sigmoid_table()[:255])


def test_an_int16_logistic_written_at_another_output_scale_is_refused_as_its_prepare_refuses_it(tmp_path):
    path = tmp_path / "logistic.tflite"
    path.write_bytes(one_operator_model("LOGISTIC", [Tensor((1, 8), np.int16, 1e-3)], Tensor((1, 8), np.int16, 1 / 256)))
    with pytest.raises(TfliteError, match=r"operator 0 \(LOGISTIC on int16\): .*output scale 0.00390625.*writes scale 1/32768"):
        ir_of_tflite(read_tflite(path))


@pytest.mark.parametrize("operator", ["LOGISTIC", "TANH"])
@pytest.mark.parametrize("input_scale", [2.0**-12, 2.0**-11, 2.0**-12 * 1.0005, 2.0**-12 * 1.002, 2.0**-16, 1e-3])
def test_16x8_logistic_and_tanh_at_every_input_as_each_runtime_and_the_c_compute_them(tmp_path, operator, input_scale):
    """Every int16 input, at the scales where Prepare takes the power-of-two path (2^-12 for both, 2^-11 for TANH,
    within CheckedLog2's 1e-3 of a power) and the general multiplier's (just beyond it, fine and coarse scales)."""
    data = one_operator_model(operator, [Tensor((1, 65536), np.int16, input_scale)], Tensor((1, 65536), np.int16, 1 / 32768))
    _everywhere(tmp_path, data, np.arange(-32768, 32768, dtype=np.int16).reshape(1, 65536))


# --- each 16x8 operator at the extremes of its arithmetic, in one-operator files (tests/tflite_builder.py) -------------

EXAMPLES = settings(max_examples=30, deadline=None, derandomize=True)
scales = st.floats(1e-4, 4.0).map(lambda value: float(np.float32(value)))
# input scale x weight scale / output scale: far right to left, and just below one, where the multiplier's 16-bit
# reduction saturates at 0x7FFF (the quantized multiplier is 0x7FFF0000 or more)
multipliers = st.floats(-24.0, 2.5).map(lambda exponent: 2.0**exponent) | st.sampled_from([0.99999, 0.999995])


def _everywhere(tmp_path, data: bytes, inputs: np.ndarray) -> None:
    """The file's output by the IR's kernels under each runtime is its interpreter's, and the generated C's is the
    kernels'."""
    path = tmp_path / "model.tflite"
    path.write_bytes(data)
    model = read_tflite(path)
    for name in ("litert_reference", "tflm"):
        ours = run_int8(model, inputs, RUNTIMES[name])[model.outputs[0]]
        theirs = runner_of(name, path).tensors(inputs)[model.outputs[0]].reshape(ours.shape)
        assert ours.dtype == np.int16 and np.array_equal(ours, theirs), (name, np.flatnonzero(ours.ravel() != theirs.ravel())[:5])
        ir = ir_of_tflite(model, runtime=RUNTIMES[name])
        if len(ir.layers) == 1 and len(model.inputs) == 1:
            images = inputs.reshape(len(inputs), *generate_c(ir).input_shape)
            assert np.array_equal(c_output(ir, [images], tmp_path / name).reshape(ours.shape), ours), name


def _int16_batch(rng, shape, count: int) -> np.ndarray:
    batch = rng.integers(-32768, 32768, (count, *shape)).astype(np.int16)
    batch[0], batch[1] = -32768, 32767
    return batch


@EXAMPLES
@given(seed=st.integers(0, 2**16), input_scale=scales, multiplier=multipliers, activation=st.sampled_from([0, 1, 3]),
       operator=st.sampled_from(["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"]))
def test_16x8_convolutions_at_their_extremes_as_each_runtime_and_the_c_compute_them(tmp_path_factory, seed, input_scale, multiplier,
                                                                                     activation, operator):
    """int16 inputs at both ends, int8 weights at +-127, channel 0's int64 bias as large as the kernels' contract allows
    (the sums below 2^47, a dense layer's below 2^32 (LiteRT rounds its product with the multiplier once, in int64),
    and, rescaled, within int32)."""
    rng = np.random.default_rng(seed)
    height, width, channels, outputs = int(rng.integers(2, 6)), int(rng.integers(2, 6)), int(rng.integers(1, 5)), int(rng.integers(1, 7))
    shape, weight_shape, axis, options = {
        "CONV_2D": ((1, height, width, channels), (outputs, 3, 3, channels), 0, ("Conv2DOptions", {"padding": 0})),
        "DEPTHWISE_CONV_2D": ((1, height, width, channels), (1, 3, 3, channels), 3, ("DepthwiseConv2DOptions", {"padding": 0, "depthMultiplier": 1})),
        "FULLY_CONNECTED": ((1, channels * 9), (outputs, channels * 9), 0, ("FullyConnectedOptions", {})),
    }[operator]
    outputs = weight_shape[axis]
    options[1].update(fusedActivationFunction=activation, **({} if operator == "FULLY_CONNECTED" else {"strideH": 1, "strideW": 1}))
    weight = rng.choice([-127, 127, 0, 1], weight_shape).astype(np.int8)
    output_scale = 0.01
    weight_scales = (multiplier * output_scale / input_scale) * rng.uniform(0.9, 1.0, outputs)
    reduction = int(np.prod(weight_shape)) // outputs if operator != "DEPTHWISE_CONV_2D" else 9
    sums = 32768 * 127 * reduction
    rescaled_limits = ((2**31 - 2**17) / (input_scale * weight_scales / output_scale)).astype(np.int64)  # within int32, rescaled
    limits = np.maximum(np.minimum(rescaled_limits, 2**31 if operator == "FULLY_CONNECTED" else 2**46) - sums, 1)
    bias = np.array([rng.integers(-limit, limit) for limit in np.minimum(limits, 2**30)], np.int64)
    bias[0] = limits[0] - 1
    data = one_operator_model(operator, [Tensor(shape, np.int16, input_scale), Tensor(weight_shape, np.int8, list(weight_scales), 0, axis, weight),
                                         Tensor((outputs,), np.int64, list(input_scale * weight_scales), 0, 0, bias)],
                              Tensor((*shape[:-1], outputs), np.int16, output_scale), options)
    _everywhere(tmp_path_factory.mktemp("conv16"), data, _int16_batch(rng, shape[1:], 12))


@EXAMPLES
@given(seed=st.integers(0, 2**16), first=scales, second=scales, output=scales, activation=st.sampled_from([0, 1, 3]))
def test_16x8_add_at_its_extremes_as_each_runtime_computes_it(tmp_path_factory, seed, first, second, output, activation):
    """The input, and a 1x1 convolution of it at another scale (saturating where that scale is fine), added: ADD of two
    scales at int16 (pot_scale_int16 false, as the converter writes it)."""
    rng = np.random.default_rng(seed)
    channels = int(rng.integers(1, 6))
    shape = (1, 3, 4, channels)
    identity = (127 * np.eye(channels, dtype=np.int64)).reshape(channels, 1, 1, channels).astype(np.int8)
    tensors = [Tensor(shape, np.int16, first), Tensor(identity.shape, np.int8, [1 / 127] * channels, 0, 0, identity),
               Tensor((channels,), np.int64, [first / 127] * channels, 0, 0, np.zeros(channels, np.int64)), Tensor(shape, np.int16, second),
               Tensor(shape, np.int16, output)]
    data = model_bytes(tensors, [("CONV_2D", [0, 1, 2], 3, ("Conv2DOptions", {"padding": 0, "strideH": 1, "strideW": 1})),
                                 ("ADD", [0, 3], 4, ("AddOptions", {"fusedActivationFunction": activation, "potScaleInt16": False}))],
                       [0], [4])
    _everywhere(tmp_path_factory.mktemp("add16"), data, _int16_batch(rng, shape[1:], 12))


@EXAMPLES
@given(seed=st.integers(0, 2**16), first=scales, second=scales, output=scales, activation=st.sampled_from([0, 1, 3]),
       constant=st.booleans())
def test_16x8_mul_at_its_extremes_as_each_runtime_and_the_c_compute_it(tmp_path_factory, seed, first, second, output, activation,
                                                                       constant):
    """MUL of int16s at both ends: the input times a constant broadcast over the channels (one operator: its C too), or
    times a 1x1 convolution of it at another scale (saturating where that scale is fine)."""
    rng = np.random.default_rng(seed)
    channels = int(rng.integers(1, 6))
    shape = (1, 3, 4, channels)
    options = ("MulOptions", {"fusedActivationFunction": activation})
    if constant:
        factor = rng.integers(-32768, 32768, channels).astype(np.int16)
        factor[0] = -32768
        data = one_operator_model("MUL", [Tensor(shape, np.int16, first), Tensor((channels,), np.int16, second, 0, 0, factor)],
                                  Tensor(shape, np.int16, output), options)
    else:
        identity = (127 * np.eye(channels, dtype=np.int64)).reshape(channels, 1, 1, channels).astype(np.int8)
        tensors = [Tensor(shape, np.int16, first), Tensor(identity.shape, np.int8, [1 / 127] * channels, 0, 0, identity),
                   Tensor((channels,), np.int64, [first / 127] * channels, 0, 0, np.zeros(channels, np.int64)), Tensor(shape, np.int16, second),
                   Tensor(shape, np.int16, output)]
        data = model_bytes(tensors, [("CONV_2D", [0, 1, 2], 3, ("Conv2DOptions", {"padding": 0, "strideH": 1, "strideW": 1})),
                                     ("MUL", [0, 3], 4, options)], [0], [4])
    _everywhere(tmp_path_factory.mktemp("mul16"), data, _int16_batch(rng, shape[1:], 12))


@EXAMPLES
@given(seed=st.integers(0, 2**16), input_scale=st.floats(1e-5, 0.01).map(lambda value: float(np.float32(value))),
       beta=st.sampled_from([1.0, 0.5, 2.0]), depth=st.integers(2, 40))
def test_16x8_softmax_as_each_runtime_computes_it(tmp_path_factory, seed, input_scale, beta, depth):
    """The tables each runtime generates (LiteRT in double, TFLite Micro in float) and the normalization, on rows
    spanning the whole int16 range."""
    rng = np.random.default_rng(seed)
    data = one_operator_model("SOFTMAX", [Tensor((1, depth), np.int16, input_scale)], Tensor((1, depth), np.int16, 1.0 / 32768),
                              ("SoftmaxOptions", {"beta": beta}))
    _everywhere(tmp_path_factory.mktemp("softmax16"), data, _int16_batch(rng, (depth,), 40))
