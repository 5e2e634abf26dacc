"""The tflite_int8 scheme's network written as a .tflite (core/backends/tflite/): TFLite's reference kernels
(LiteRT's BUILTIN_REF interpreter) run the file, and give every tensor the scheme's own kernels give on it;
the file holds the calibration table's scales and zero points; a network with an operation no writer covers
is refused naming the layer. Real models: MLPerf Tiny's float ResNet-8 calibrated on tflite_int8 (its
integers under TFLite's kernels meet MLCommons' own int8 model), and Keras models built here."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from rich.console import Console

from conftest import CIFAR10_DIR, MODELS, compose
from core.backends.tflite.export import export_tflite
from core.backends.tflite.ops import NOT_WRITTEN, WRITERS
from core.data.datasets import load_cifar10
from core.frontend.graph import Graph
from core.frontend.tflite import read_tflite
from core.ir.layers import group_layers
from core.ir.ops import OPS
from core.ir.tflite_interpreter import run_int8
from core.quantize.evaluation import sqnr_db
from core.quantize.runtimes import RUNTIMES
from core.quantize.table import CalibrationTable
from core.quantize.tflite_math import affine_quantize, dequantize
from core.quantize.tflite_reference import reference_tensors, runner_of
from pipeline.main import run_pipeline
from pipeline.runner import StageFailed

RESNET8 = MODELS / "mlperf_tiny_resnet8" / "pretrainedResnet.h5"
needs_resnet8 = pytest.mark.skipif(not (RESNET8.exists() and CIFAR10_DIR.exists()),
                                   reason=f"{RESNET8} or {CIFAR10_DIR} is missing: the shared test data are not beside the checkout")


def test_every_operation_has_a_writer_or_is_declared_unwritten():
    assert not set(WRITERS) & set(NOT_WRITTEN)
    assert set(WRITERS) | set(NOT_WRITTEN) == set(OPS)


def _calibrated(workspace, *overrides):
    summary = run_pipeline(compose(*workspace, "target=tflite_int8", "until=calibrate", *overrides), console=Console(file=io.StringIO()))
    directory = summary.results[-1].artifact.directory
    return group_layers(Graph.load(directory)), CalibrationTable.load(directory)


def _assert_every_tensor_equal(path, inputs) -> dict:
    model = read_tflite(path)
    ours, reference = run_int8(model, inputs), reference_tensors(path, inputs)
    for operator in model.operators:
        output = operator.outputs[0]
        assert np.array_equal(ours[output], reference[output]), f"operator {operator.index} ({operator.name})"
    return ours


def _assert_table_quantization(path, layer_graph, table):
    """The file's activation tensors hold the table's scales (float32) and zero points."""
    model = read_tflite(path)
    expected = {(float(np.float32(entry.scale)), entry.zero_point) for entry in table.tensors.values() if entry.kind in ("input", "activation")}
    stored = {(float(t.quantization.scale[0]), int(t.quantization.zero_point[0])) for t in model.tensors if t.data is None}
    assert stored <= expected and len(stored) > 1


@needs_resnet8
def test_resnet8_calibrated_on_tflite_int8_runs_on_tflites_kernels_as_on_ours_and_meets_mlcommons_int8(workspace, tmp_path):
    layer_graph, table = _calibrated(workspace, "model=keras_cifar10", f"model.file.path={RESNET8}", f"data.path={CIFAR10_DIR}",
                                     "model.preprocess.scale=1", "model.preprocess.offset=0")
    path = tmp_path / "resnet8.tflite"
    path.write_bytes(export_tflite(layer_graph, table))
    _assert_table_quantization(path, layer_graph, table)
    model = read_tflite(path)
    images, labels = load_cifar10(CIFAR10_DIR, "test_batch")
    source = model.tensor(model.inputs[0]).quantization
    inputs = affine_quantize(images.astype(np.float32), float(source.scale[0]), int(source.zero_point[0]))
    _assert_every_tensor_equal(path, inputs[:64])
    sink = model.tensor(model.outputs[0]).quantization
    scores = dequantize(run_int8(model, inputs)[model.outputs[0]], float(sink.scale[0]), int(sink.zero_point[0]))
    expected = tf.keras.models.load_model(RESNET8, compile=False).predict(images.astype(np.float32), verbose=0)
    # ../shared/models/README.md: MLCommons' own int8 model, 87.47% top-1 and 21.6 dB against the float softmax
    assert np.mean(scores.argmax(axis=1) == labels) >= 0.8747 and sqnr_db(expected, scores) >= 21.6


def _every_writer_model() -> tf.keras.Model:
    """Each writer's cases: an explicit Pad folded into a conv (written as PAD), SAME and VALID, strides, a depth
    multiplier, both pools, the global average (MEAN), a residual add, a flatten, dense, softmax."""
    tf.keras.utils.set_random_seed(17)
    layers = tf.keras.layers
    inputs = tf.keras.Input((11, 9, 3))
    x = layers.Conv2D(8, 3, activation="relu")(layers.ZeroPadding2D(((2, 0), (1, 1)))(inputs))
    x = layers.DepthwiseConv2D(3, depth_multiplier=2, strides=2, padding="same", activation="relu6")(x)
    x = layers.Add()([layers.Conv2D(16, 1)(x), layers.Conv2D(16, 3, padding="same")(x)])
    pooled = layers.Dense(7)(layers.Flatten()(layers.GlobalAveragePooling2D(keepdims=True)(x)))
    x = layers.AveragePooling2D(2, strides=1, padding="same")(layers.MaxPooling2D(2)(x))
    x = layers.Add()([layers.Dense(7)(layers.Flatten()(x)), pooled])
    return tf.keras.Model(inputs, layers.Softmax()(x))


def _elementwise_writer_model() -> tf.keras.Model:
    """The element-wise writers: a squeeze-excitation gate (sigmoid, a broadcasting mul), tanh, leaky ReLU and hard swish, a
    concatenation of inputs at three quantizations (QUANTIZE before it), a bilinear resize."""
    tf.keras.utils.set_random_seed(19)
    layers = tf.keras.layers
    inputs = tf.keras.Input((6, 6, 3))
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    gate = layers.Conv2D(8, 1, activation="sigmoid")(layers.GlobalAveragePooling2D(keepdims=True)(x))
    x = layers.Multiply()([x, gate])
    x = layers.Concatenate()([layers.Activation("tanh")(x), layers.LeakyReLU(0.2)(x), layers.Activation("hard_swish")(x), x])
    x = layers.Conv2D(4, 3, strides=2, padding="same")(layers.UpSampling2D(2, interpolation="bilinear")(x))
    return tf.keras.Model(inputs, layers.Softmax()(layers.Dense(5)(layers.Flatten()(x))))


def test_the_elementwise_writers_give_a_file_tflites_reference_kernels_run_as_ours(workspace, tmp_path):
    layer_graph, table = _calibrated(workspace, *_saved(_elementwise_writer_model(), tmp_path, "elementwise"), "calib.method=minmax")
    path = tmp_path / "elementwise.tflite"
    path.write_bytes(export_tflite(layer_graph, table))
    names = {operator.name for operator in read_tflite(path).operators}
    assert {"LOGISTIC", "MUL", "TANH", "LEAKY_RELU", "HARD_SWISH", "QUANTIZE", "CONCATENATION", "RESIZE_BILINEAR"} <= names, names
    _assert_every_tensor_equal(path, np.random.default_rng(10).integers(-128, 128, (16, 6, 6, 3)).astype(np.int8))
    _assert_close_to_the_float_graph(path, layer_graph, np.random.default_rng(11).normal(0, 1, (32, 6, 6, 3)).astype(np.float32))


def _affine_clamp_model() -> tf.keras.Model:
    """The element-wise layers Keras users write that TFLite has no one operator for: ReLU(max_value=4), hard_sigmoid's
    relu6(x + 3) / 6 gating a squeeze-excitation, a Rescaling mid-network, a clip at [1, 3] and a Minimum at -0.5 (their
    calibrated ranges keep 0, so the bounds at 1 and -0.5 are operators of their own)."""
    tf.keras.utils.set_random_seed(23)
    layers = tf.keras.layers
    inputs = tf.keras.Input((6, 6, 3))
    x = layers.ReLU(max_value=4.0)(layers.Conv2D(8, 3, padding="same")(inputs))
    gate = layers.Conv2D(8, 1, activation="hard_sigmoid")(layers.GlobalAveragePooling2D(keepdims=True)(x))
    x = layers.Rescaling(0.5, offset=-1.0)(layers.Multiply()([x, gate]))
    x = layers.Concatenate()([tf.keras.ops.clip(x, 1.0, 3.0), tf.keras.ops.minimum(x, -0.5)])
    return tf.keras.Model(inputs, layers.Dense(5)(layers.Flatten()(layers.Conv2D(4, 3, strides=2)(x))))


@pytest.mark.parametrize("runtime", ["litert_reference", "tflm"])
def test_affine_maps_and_clamps_are_written_as_tflite_operators_each_runtime_computes_as_ours(workspace, tmp_path, runtime):
    layer_graph, table = _calibrated(workspace, *_saved(_affine_clamp_model(), tmp_path, "affine_clamp"), "calib.method=minmax")
    path = tmp_path / "affine_clamp.tflite"
    path.write_bytes(export_tflite(layer_graph, table))
    names = [operator.name for operator in read_tflite(path).operators]
    # the Rescaling and hard_sigmoid's affine map: 1x1 depthwise convs; ReLU(max_value=4): a requantization; the clip's bound
    # at 1 and the Minimum: one operator each
    assert names.count("DEPTHWISE_CONV_2D") == 2 and {"QUANTIZE", "MAXIMUM", "MINIMUM"} <= set(names), " ".join(names)
    _assert_every_operator_as_the_runtime(path, np.random.default_rng(12).integers(-128, 128, (8, 6, 6, 3)).astype(np.int8), runtime)
    _assert_close_to_the_float_graph(path, layer_graph, np.random.default_rng(13).normal(0, 1, (32, 6, 6, 3)).astype(np.float32))


def _assert_every_operator_as_the_runtime(path, inputs: np.ndarray, runtime: str) -> None:
    """Every operator's output by our kernels, as `runtime` computes the file, is that runtime's interpreter's."""
    model = read_tflite(path)
    ours, theirs = run_int8(model, inputs, RUNTIMES[runtime]), runner_of(runtime, path).tensors(inputs)
    for operator in model.operators:
        assert np.array_equal(ours[operator.outputs[0]], theirs[operator.outputs[0]]), f"operator {operator.index} ({operator.name})"


def _assert_close_to_the_float_graph(path, layer_graph, images: np.ndarray) -> None:
    """The file is the model: its integers against the float graph on data like the calibration's."""
    model = read_tflite(path)
    source, sink = (model.tensor(index).quantization for index in (model.inputs[0], model.outputs[0]))
    integers = run_int8(model, affine_quantize(images, float(source.scale[0]), int(source.zero_point[0])))[model.outputs[0]]
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(layer_graph.graph.to_graph_def(), name="")
        with tf.compat.v1.Session(graph=graph) as session:
            expected = session.run(layer_graph.graph.end_points[0], {layer_graph.graph.input_tensor: images})
    assert sqnr_db(expected, dequantize(integers, float(sink.scale[0]), int(sink.zero_point[0]))) > 20


def _saved(model: tf.keras.Model, tmp_path, name: str):
    path = tmp_path / f"{name}.keras"
    model.save(path)
    rng = np.random.default_rng(4)
    shape = model.inputs[0].shape[1:]
    arrays = tmp_path / f"{name}.npz"
    np.savez(arrays, calib=rng.normal(0, 1, (32, *shape)).astype(np.float32), eval=rng.normal(0, 1, (8, *shape)).astype(np.float32))
    return ["model=keras_cifar10", f"model.name={name}", "model.format=keras", f"model.file.path={path}", "data=arrays",
            f"data.path={arrays}"]


def test_every_writer_gives_a_file_tflites_reference_kernels_run_as_ours(workspace, tmp_path):
    layer_graph, table = _calibrated(workspace, *_saved(_every_writer_model(), tmp_path, "every_writer"), "calib.method=minmax")
    path = tmp_path / "every_writer.tflite"
    path.write_bytes(export_tflite(layer_graph, table))
    names = {operator.name for operator in read_tflite(path).operators}
    assert {"PAD", "CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "MEAN", "MAX_POOL_2D", "AVERAGE_POOL_2D", "RESHAPE", "FULLY_CONNECTED",
            "SOFTMAX"} <= names, names
    _assert_table_quantization(path, layer_graph, table)
    rng = np.random.default_rng(8)
    inputs = rng.integers(-128, 128, (16, 11, 9, 3)).astype(np.int8)
    inputs[0], inputs[1] = -128, 127
    _assert_every_tensor_equal(path, inputs)
    _assert_close_to_the_float_graph(path, layer_graph, np.random.default_rng(9).normal(0, 1, (32, 11, 9, 3)).astype(np.float32))


def _silu_gate_model() -> tf.keras.Model:
    """SiLU as Keras 3 writes it (x * sigmoid(1 * x)) and as a hand-written swish (x * sigmoid(x)), and a squeeze-excitation
    gate with hard_sigmoid on a Dense output (an affine map and clamps of a [N, C] tensor)."""
    tf.keras.utils.set_random_seed(29)
    layers = tf.keras.layers
    inputs = tf.keras.Input((6, 6, 3))
    x = layers.Conv2D(8, 3, padding="same", activation="silu")(inputs)
    gate = layers.Dense(8, activation="hard_sigmoid")(layers.Dense(4, activation="relu")(layers.GlobalAveragePooling2D()(x)))
    x = layers.Multiply()([x, layers.Reshape((1, 1, 8))(gate)])
    x = layers.Conv2D(8, 3, strides=2, padding="same")(x)
    x = layers.Multiply()([x, layers.Activation("sigmoid")(x)])
    return tf.keras.Model(inputs, layers.Dense(5)(layers.Flatten()(x)))


@pytest.mark.parametrize("runtime", ["litert_reference", "tflm"])
def test_silu_and_a_gate_on_a_dense_output_are_written_as_tflite_operators_each_runtime_computes_as_ours(workspace, tmp_path, runtime):
    layer_graph, table = _calibrated(workspace, *_saved(_silu_gate_model(), tmp_path, "silu_gate"), "calib.method=minmax")
    luts = [layer.attrs.named.name for layer in layer_graph.layers if layer.op == "lut" and layer.attrs.named is not None]
    assert luts == ["silu", "silu"], luts  # both spellings are one known function
    path = tmp_path / "silu_gate.tflite"
    path.write_bytes(export_tflite(layer_graph, table))
    names = [operator.name for operator in read_tflite(path).operators]
    # SiLU: LOGISTIC then MUL by x, twice; the gate's affine map: a 1x1 depthwise conv between RESHAPEs to an image and back
    assert names.count("LOGISTIC") == 2 and names.count("MUL") == 3 and "DEPTHWISE_CONV_2D" in names, " ".join(names)
    depthwise = names.index("DEPTHWISE_CONV_2D")
    assert names[depthwise - 1] == names[depthwise + 1] == "RESHAPE", " ".join(names)
    _assert_every_operator_as_the_runtime(path, np.random.default_rng(14).integers(-128, 128, (8, 6, 6, 3)).astype(np.int8), runtime)
    _assert_close_to_the_float_graph(path, layer_graph, np.random.default_rng(15).normal(0, 1, (32, 6, 6, 3)).astype(np.float32))


def test_a_function_no_tflite_operator_computes_is_refused_before_calibration_naming_the_layer_and_the_targets_taking_it(workspace, tmp_path):
    inputs = tf.keras.Input((6, 6, 2))
    model = tf.keras.Model(inputs, tf.keras.layers.Activation("softplus")(tf.keras.layers.Conv2D(4, 3)(inputs)))
    with pytest.raises(StageFailed, match=r"stage calibrate failed: target=tflite_int8 cannot take 1 layer of this model \(nothing was "
                                          r"calibrated\):\n  - layer .*Softplus.* \(lut\): the function .*Softplus.* it writes sigmoid, "
                                          r"tanh, hard swish, SiLU .*; targets that take it: accel, accel_small, tf2ir\n"
                                          r"choose target=accel or target=accel_small or target=tf2ir"):
        _calibrated(workspace, *_saved(model, tmp_path, "softplus"), "calib.method=minmax")


def test_every_layer_a_target_cannot_take_is_refused_at_once_before_calibration(workspace, tmp_path):
    """On TFLite's 16x8 mode: a function no TFLite operator computes and an operation without int16 arithmetic, each with
    the targets that take it; no calibration statistics are gathered."""
    inputs = tf.keras.Input((6, 6, 2))
    x = tf.keras.layers.Conv2D(4, 3, padding="same")(inputs)
    gated = tf.keras.layers.Activation("hard_swish")(tf.keras.layers.Conv2D(4, 1)(x))
    model = tf.keras.Model(inputs, tf.keras.layers.Add()([tf.keras.layers.Activation("softplus")(x), gated]))
    overrides = [*_saved(model, tmp_path, "two_refusals"), "target=tflite_int16x8", "until=calibrate"]
    output = io.StringIO()
    with pytest.raises(StageFailed) as failure:
        run_pipeline(compose(*workspace, *overrides), console=Console(file=output))
    message = str(failure.value)
    assert "target=tflite_int16x8 cannot take 2 layers of this model (nothing was calibrated)" in message, message
    softplus, hard_swish = (line for line in message.splitlines() if line.startswith("  - layer "))
    assert "Softplus" in softplus and softplus.endswith("targets that take it: accel, accel_small, tf2ir"), softplus
    assert "HARD_SWISH (lut) on int8 only, its int16 arithmetic is not built yet" in hard_swish, hard_swish
    assert hard_swish.endswith("targets that take it: accel, accel_small, accel_tflite, tf2ir, tflite_int8"), hard_swish
    assert message.endswith("choose target=accel or target=accel_small or target=tf2ir, or change the model"), message


def test_an_operator_the_chosen_runtime_has_no_kernel_for_is_refused_before_calibration(workspace, tmp_path):
    """TFLM's RESIZE_BILINEAR takes int8 only: at 16x8 on target.scheme.runtime=tflm a bilinear upsampling is refused
    naming the runtime, before any statistics are gathered; on LiteRT's reference kernels the same model is taken."""
    inputs = tf.keras.Input((6, 6, 2))
    model = tf.keras.Model(inputs, tf.keras.layers.UpSampling2D(2, interpolation="bilinear")(tf.keras.layers.Conv2D(4, 3)(inputs)))
    overrides = [*_saved(model, tmp_path, "bilinear"), "target=tflite_int16x8", "until=calibrate"]
    with pytest.raises(StageFailed, match=r"stage calibrate failed: target=tflite_int16x8 cannot take 1 layer of this model \(nothing "
                                          r"was calibrated\):\n  - layer .* \(resize_bilinear\): it is written as RESIZE_BILINEAR; "
                                          r"target.scheme.runtime=tflm's interpreter has no int16 kernel for RESIZE_BILINEAR"):
        run_pipeline(compose(*workspace, *overrides, "target.scheme.runtime=tflm"), console=Console(file=io.StringIO()))
    summary = run_pipeline(compose(*workspace, *overrides), console=Console(file=io.StringIO()))
    assert summary.results[-1].stage.name == "calibrate"


RESNET8_INT8 = MODELS / "mlperf_tiny_resnet8" / "pretrainedResnet_quant.tflite"


@pytest.mark.skipif(not (RESNET8_INT8.exists() and CIFAR10_DIR.exists()), reason=f"{RESNET8_INT8} or {CIFAR10_DIR} is missing")
def test_mlcommons_int8_resnet8_imported_calibrated_as_trained_and_written_again_gives_every_output_byte(workspace, tmp_path):
    """The round trip: the file's scales and zero points into the table (qat), the table's network written again;
    the two files give the same bytes on every test image, the reference kernels' 744/846."""
    layer_graph, table = _calibrated(workspace, "model=keras_cifar10", "model.format=tflite", f"model.file.path={RESNET8_INT8}",
                                     "model.preprocess.scale=1", "model.preprocess.offset=0", "model.preprocess.resize=none",
                                     "calib.method=qat", f"data.path={CIFAR10_DIR}")
    path = tmp_path / "written_again.tflite"
    path.write_bytes(export_tflite(layer_graph, table))
    images, labels = load_cifar10(CIFAR10_DIR, "test_batch")
    inputs = (images.astype(np.int16) - 128).astype(np.int8)
    original, written = read_tflite(RESNET8_INT8), read_tflite(path)
    scores = run_int8(written, inputs)[written.outputs[0]]
    assert np.array_equal(scores, run_int8(original, inputs)[original.outputs[0]])
    assert int((scores.argmax(axis=1) == labels).sum()) == 744
    _assert_every_tensor_equal(path, inputs[:64])
