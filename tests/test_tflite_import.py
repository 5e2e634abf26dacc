"""model.format=tflite: a `.tflite` file through the product path. A float file becomes the float graph
TFLite computes (checked against TFLite's own interpreter, every operator the reader takes); an int8
file's quantization becomes calib.method=qat's table bit for bit (the file's float32 scales and zero
points, not approximations of them from the FakeQuant ranges), on target=tflite_int8."""

from __future__ import annotations

import collections
import dataclasses
import io
import re
from pathlib import Path

from ai_edge_litert.interpreter import Interpreter
import numpy as np
import pytest
import tensorflow as tf
from rich.console import Console

from conftest import CIFAR10_DIR, MODELS, compose
from tflite_builder import Tensor, model_bytes, one_operator_model
from tensorflow.lite.tools import flatbuffer_utils
from core.frontend.graph import Graph
from core.frontend.importer import load_graph_def
from core.frontend.layers import QKind
from core.backends.c.build import compile_program, run_program
from core.backends.program import generate_program
from core.data.datasets import load_cifar10
from core.frontend.tflite import TfliteError, read_tflite
from core.frontend.tflite_graph import CONVERTERS, FLOAT_ONLY, tflite_graph_def
from core.ir.io import PARAM_NAME_CHARACTERS, read_ir
from core.ir.op import DIALECTS, OPS
from core.ir.layers import group_layers
from core.quantize.table import CalibrationTable
from core.quantize.tflite_reference import reference_tensors
from pipeline.config import ConfigError
from pipeline.main import run_pipeline
from pipeline.quality import QualityFailed
from pipeline.runner import StageFailed
from stages.codegen import read_plan
from stages.partition import PLAN_FILE

RESNET8 = MODELS / "mlperf_tiny_resnet8" / "pretrainedResnet_quant.tflite"
needs_resnet8 = pytest.mark.skipif(not (RESNET8.exists() and CIFAR10_DIR.exists()),
                                   reason=f"{RESNET8} or {CIFAR10_DIR} is missing: the shared test data are not beside the checkout")
SHAPE = (12, 10, 4)
TARGETS = {"host": ("target=tflite_int8",),
           "host_tflm": ("target=tflite_int8", "target.scheme.runtime=tflm"),  # TFLite Micro's bytes (core/quantize/runtimes.py)
           # and the accelerator with each of seed 004 Fig. 4's bias placements
           "accel_bias_in_accumulators": ("target=accel_tflite", "target.accelerator.bias_in_accumulators=true"),
           "accel_bias_by_the_alu": ("target=accel_tflite", "target.accelerator.bias_in_accumulators=false")}


def _attention_mix(t):
    """An attention's products of two activations over the channels as heads (TRANSPOSE, BATCH_MATMUL with adj_y and
    without, TRANSPOSE back): softmax-free scores of the pixels of each row, mixing them."""
    heads = tf.transpose(t, [0, 3, 1, 2])
    return tf.transpose(tf.linalg.matmul(tf.linalg.matmul(heads, heads, adjoint_b=True), heads), [0, 2, 3, 1])


def _position_embedding(t):
    """t plus a constant of its image's shape (a position embedding), which the converter writes as ADD's constant operand."""
    size = int(np.prod(t.shape[1:]))
    return t + tf.constant(np.linspace(-0.5, 0.5, size).reshape(1, *t.shape[1:]), tf.float32)


def _every_layer_model() -> tf.keras.Model:
    """The Keras layers whose conversion gives each operator the reader takes."""
    tf.keras.utils.set_random_seed(11)
    layers = tf.keras.layers
    inputs = tf.keras.Input(SHAPE)
    x = layers.ZeroPadding2D(((1, 0), (0, 1)))(inputs)
    x = layers.Conv2D(8, 3, strides=2, padding="valid", activation="relu6")(x)  # a Pad folds into a VALID conv
    x = layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same", activation="relu")(x)
    x = layers.Add()([layers.Conv2D(16, 1)(x), x])
    gate = layers.Activation("sigmoid")(layers.Conv2D(16, 1)(x))
    x = layers.Multiply()([x, gate])
    x = layers.Add()([x, layers.Lambda(_attention_mix)(x)])
    x = layers.Cropping2D(((1, 1), (0, 1)))(layers.ZeroPadding2D(((1, 1), (0, 1)))(x))  # STRIDED_SLICE (and PAD)
    x = layers.Concatenate()([layers.Activation("tanh")(x), layers.Activation("hard_swish")(x), layers.LeakyReLU(0.1)(x)])
    # Keras 3's UpSampling2D(interpolation="nearest") converts to EXPAND_DIMS and TILE; tf.image.resize to the operator
    up = layers.Lambda(lambda t: tf.image.resize(t, [2 * t.shape[1], 2 * t.shape[2]], method="nearest"))(x)
    x = layers.Add()([layers.UpSampling2D(2, interpolation="bilinear")(x), up])
    x = layers.MaxPooling2D(2)(x)
    x = layers.Lambda(_position_embedding)(x)  # ADD of a constant of every element: the IR's constant
    x = layers.Lambda(lambda t: tf.maximum(tf.minimum(t, 3.0), -2.0))(x)  # MINIMUM and MAXIMUM, of one quantization in int8
    x = layers.Concatenate()([layers.ReLU()(x), layers.ReLU(6.0)(x), layers.Lambda(lambda t: tf.clip_by_value(t, -1.0, 1.0))(x),
                              layers.Lambda(lambda t: tf.clip_by_value(t, 0.0, 1.0))(x)])  # RELU, RELU6, RELU_N1_TO_1, MINIMUM + RELU
    x = layers.AveragePooling2D(2, padding="same")(x)
    pooled = layers.Add()([layers.GlobalAveragePooling2D()(x), layers.GlobalMaxPooling2D()(x)])  # MEAN, REDUCE_MAX
    flat = layers.Lambda(lambda t: tf.reshape(t, [-1, int(np.prod(t.shape[1:]))]))(x)
    x = layers.Concatenate()([layers.Dense(6)(flat), layers.Dense(6)(pooled)])
    return tf.keras.Model(inputs, layers.Softmax()(x))


def _convert(model: tf.keras.Model, quantized: bool) -> bytes:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if quantized:
        rng = np.random.default_rng(0)
        samples = [rng.normal(0, 1, (1, *SHAPE)).astype(np.float32) for _ in range(16)]
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([sample] for sample in samples)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
    return converter.convert()


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tflite_import")
    model = _every_layer_model()
    paths = {"float": directory / "float.tflite", "int8": directory / "int8.tflite"}
    for kind, path in paths.items():
        path.write_bytes(_convert(model, kind == "int8"))
    return paths


def _run_graph_def(loaded, inputs: np.ndarray) -> np.ndarray:
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(loaded.graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as session:
            return session.run(loaded.default_end_points[0], {loaded.default_input_tensor: inputs})


def test_a_float_file_imports_as_the_graph_tflite_computes(converted):
    model = read_tflite(converted["float"])
    names = {operator.name for operator in model.operators}
    # what a float model converts to: every operator but the int8 model's QUANTIZE and DEQUANTIZE, and RELU_0_TO_1, which
    # no Keras layer converts to (clip(0, 1) is a MINIMUM and a RELU; tests/test_runtimes.py reads the operator); GELU,
    # which TFLM cannot run, is read from the converter's GELU model (tests/test_models_2026.py); RSQRT from its own (below);
    # GATHER, which reads int32 token ids, from the text model's file (tests/test_models_2026.py); SLICE and SUM, which no
    # Keras layer converts to, from litert-torch's operators (below), EXP, which TFLM cannot run, from its own (below); those
    # read in float files only (FLOAT_ONLY), and EXPAND_DIMS and SQUEEZE (a Conv1D's), from the files of PyTorch's and
    # ONNX's layers (tests/test_converter_forms.py)
    assert names == set(CONVERTERS) - {"QUANTIZE", "DEQUANTIZE", "RELU_0_TO_1", "GELU", "RSQRT", "GATHER", "SLICE", "SUM", "EXP",
                                       "EXPAND_DIMS", "SQUEEZE"} - FLOAT_ONLY, \
        set(CONVERTERS) - names
    inputs = np.random.default_rng(2).normal(0, 1, (8, *SHAPE)).astype(np.float32)
    interpreter = Interpreter(model_path=str(converted["float"]))
    interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], inputs.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs)
    interpreter.invoke()
    expected = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    np.testing.assert_allclose(_run_graph_def(load_graph_def("tflite", converted["float"]), inputs), expected, atol=1e-5)


def test_a_files_rsqrt_imports_as_tensorflows(tmp_path):
    """RSQRT (a LayerNormalization's inverse root) read from a float file computes what the interpreter computes."""
    inputs = tf.keras.Input((4, 4, 3))
    model = tf.keras.Model(inputs, tf.keras.layers.Lambda(lambda t: tf.math.rsqrt(t * t + 0.5))(inputs))
    path = tmp_path / "rsqrt.tflite"
    path.write_bytes(_convert(model, False))
    assert "RSQRT" in {operator.name for operator in read_tflite(path).operators}
    samples = np.random.default_rng(3).normal(0, 1, (1, 4, 4, 3)).astype(np.float32)
    interpreter = Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], samples)
    interpreter.invoke()
    expected = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    np.testing.assert_allclose(_run_graph_def(load_graph_def("tflite", path), samples), expected, rtol=1e-5)


def _file_quantization(path):
    """The file's activations' (scale, zero point) and its weights' per-channel scales, as multisets; and the
    parameters on either side of each int8 -> int8 QUANTIZE (the converter's requantization before a
    concatenation), which the graph holds as one tensor, quantized once (the tflite_int8 IR's requantize
    layer is still to come)."""
    model = read_tflite(path)
    requantized = {(float(model.tensor(index).quantization.scale[0]), int(model.tensor(index).quantization.zero_point[0]))
                   for operator in model.operators if operator.name == "QUANTIZE" and model.tensor(operator.inputs[0]).dtype == "INT8"
                   for index in (operator.inputs[0], operator.outputs[0])}
    # a constant ADD adds (a position embedding) is an activation: the IR's constant layer's output
    operands = {index for operator in model.operators if operator.name in ("ADD", "CONCATENATION") for index in operator.inputs}
    activations = collections.Counter((float(t.quantization.scale[0]), int(t.quantization.zero_point[0]))
                                      for t in model.tensors if (t.data is None or t.index in operands) and t.dtype == "INT8")
    # a per-tensor scale (ResNet-8's dense layer) is every output channel's
    weights = sorted(tuple(map(float, np.broadcast_to(t.quantization.scale, t.shape[t.quantization.axis]))) for t in model.tensors
                     if t.data is not None and t.index not in operands and t.dtype == "INT8" and t.quantization is not None
                     and t.shape)  # not a MINIMUM's bound
    return activations, weights, requantized


def _table_quantization(table: CalibrationTable):
    activations = collections.Counter((entry.scale, entry.zero_point) for entry in table.tensors.values()
                                      if entry.kind in ("input", "activation"))
    weights = sorted(tuple(entry.channel_scales) for entry in table.tensors.values() if entry.kind == "weight")
    return activations, weights


def _run(workspace, path, *overrides, target: tuple[str, ...] = ("target=tflite_int8",)):
    """The pipeline on a .tflite, up to annotate unless an override says `until=null` (every stage)."""
    cfg = compose(*workspace, "model=keras_cifar10", "model.format=tflite", f"model.file.path={path}", "model.preprocess.resize=none",
                  *target, "until=annotate", *overrides)
    summary = run_pipeline(cfg, console=Console(file=io.StringIO(), width=400))
    return summary, {result.stage.name: result.artifact.directory for result in summary.results}


def test_an_int8_file_calibrates_as_trained_with_its_own_scales_and_zero_points(converted, workspace, tmp_path):
    rng = np.random.default_rng(3)
    arrays = tmp_path / "arrays.npz"
    np.savez(arrays, calib=rng.normal(0, 1, (16, *SHAPE)).astype(np.float32), eval=rng.normal(0, 1, (24, *SHAPE)).astype(np.float32))
    summary, artifacts = _run(workspace, converted["int8"], "model.name=every_layer", "data=arrays", f"data.path={arrays}",
                              "calib.method=qat")
    file_activations, file_weights, requantized = _file_quantization(converted["int8"])
    table_activations, table_weights = _table_quantization(CalibrationTable.load(artifacts["calibrate"]))
    # every per-channel weight scale bit for bit (a depthwise kernel's included), every activation's (scale, zero point)
    # but one side of a requantization
    assert table_weights == file_weights
    assert set(table_activations) <= set(file_activations) and set(file_activations) - set(table_activations) <= requantized
    assert requantized  # the converter requantizes tanh's fixed 1/128 before the concatenation
    # the annotated graph quantizes the float graph (the file's dequantized weights) where the file does: close to it
    assert summary.metrics["annotate.sqnr_db_min"] > 25.0


@needs_resnet8
def test_mlcommons_resnet8_calibrates_as_trained_with_the_files_own_scales_and_zero_points(workspace):
    summary, artifacts = _run(workspace, RESNET8, "model.preprocess.scale=1", "model.preprocess.offset=0", "calib.method=qat",
                              f"data.path={CIFAR10_DIR}")
    file_activations, file_weights, requantized = _file_quantization(RESNET8)
    assert not requantized
    table_activations, table_weights = _table_quantization(CalibrationTable.load(artifacts["calibrate"]))
    assert table_weights == file_weights
    # every activation the file quantizes, once; the RESHAPE's output shares its input's entry
    assert set(table_activations) == set(file_activations) and sum(table_activations.values()) == sum(file_activations.values()) - 1
    # the softmax's trained range [0, 255/256] clips its certain answers: the model's own, not a quality failure
    assert summary.metrics["calibrate.clipped_fraction_max"] > 0.01 and summary.metrics["annotate.top1"] > 0.85


def test_an_unreadable_file_is_refused_before_any_stage_runs(workspace, tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"not a flatbuffer" * 8)
    with pytest.raises(ConfigError, match=r"model.file.path: .*model.tflite: not a TensorFlow Lite flatbuffer"):
        _run(workspace, path, "calib.method=qat", "data=digits")


@needs_resnet8
def test_mlcommons_resnet8_given_pixels_in_minus_one_to_one_stops_after_calibrate_naming_the_preprocessing(workspace):
    """The file quantizes its input for raw pixels, [0, 255] in steps of 1: data preprocessed to [-1, 1] use 2 of
    its 256 levels and clip nothing, and the float graph fed the same data collapses alike, so neither clipping
    nor the top-1 drop would tell; the span of the input's levels does."""
    with pytest.raises(QualityFailed) as failed:
        _run(workspace, RESNET8, "calib.method=qat", f"data.path={CIFAR10_DIR}")  # keras_cifar10's preprocessing: [-1, 1]
    (finding,) = failed.value.findings
    assert (finding.stage, finding.key) == ("calibrate", "quality.min_input_levels")
    assert "model.preprocess (scale 127.5, offset -1)" in finding.causes and "[0, 255]" in finding.figure


def _constrained_model() -> tf.keras.Model:
    tf.keras.utils.set_random_seed(13)
    layers = tf.keras.layers
    inputs = tf.keras.Input((8, 8, 3))
    x = layers.Conv2D(6, 3, padding="same")(inputs)
    pooled = layers.AveragePooling2D(2)(layers.MaxPooling2D(1)(x))
    resized = layers.UpSampling2D(2, interpolation="bilinear")(pooled)
    x = layers.Concatenate()([layers.Activation("sigmoid")(resized), layers.Activation("tanh")(x)])
    x = layers.Dense(5)(layers.Flatten()(layers.Conv2D(2, 3, strides=2)(x)))
    return tf.keras.Model(inputs, layers.Softmax()(x))


def test_tflite_int8_outputs_take_the_quantization_tflites_kernels_require(workspace, tmp_path):
    """SOFTMAX and LOGISTIC output at 1/256 with zero point -128 and TANH at 1/128 with 0, whatever the data (their
    kernels refuse anything else); pools and resizes keep their input's scale and zero point."""
    model_path = tmp_path / "constrained.keras"
    _constrained_model().save(model_path)
    rng = np.random.default_rng(5)
    arrays = tmp_path / "arrays.npz"
    np.savez(arrays, calib=rng.normal(0, 2, (16, 8, 8, 3)).astype(np.float32), eval=rng.normal(0, 2, (8, 8, 8, 3)).astype(np.float32))
    cfg = compose(*workspace, "model=keras_cifar10", "model.name=constrained", "model.format=keras", f"model.file.path={model_path}",
                  "data=arrays", f"data.path={arrays}", "target=tflite_int8", "calib.method=minmax", "until=calibrate")
    summary = run_pipeline(cfg, console=Console(file=io.StringIO(), width=400))
    calibrate = summary.results[-1].artifact.directory
    table, layer_graph = CalibrationTable.load(calibrate), group_layers(Graph.load(calibrate))
    nodes = layer_graph.graph.by_name()
    checked = collections.Counter()
    for layer in layer_graph.layers:
        tf_op, entry = nodes[layer.name].op, table.tensors.get(layer.output)
        fixed = {"Softmax": (1 / 256, -128), "Sigmoid": (1 / 256, -128), "Tanh": (1 / 128, 0)}.get(tf_op)
        if fixed:
            assert (entry.scale, entry.zero_point) == fixed, layer.name
        elif tf_op in ("AvgPool", "MaxPool", "ResizeBilinear"):
            source = table.tensors[layer_graph.scale_source(layer.inputs[0])]
            assert (entry.scale, entry.zero_point, entry.range) == (source.scale, source.zero_point, source.range), layer.name
        else:
            continue
        checked[tf_op] += 1
    assert set(checked) == {"Softmax", "Sigmoid", "Tanh", "AvgPool", "MaxPool", "ResizeBilinear"}, checked


# --- every stage: the tflite_int8 IR, its simulation against TFLite's reference kernels, the C -----------------


def _arrays(tmp_path) -> Path:
    rng = np.random.default_rng(3)
    arrays = tmp_path / "arrays.npz"
    np.savez(arrays, calib=rng.normal(0, 1, (16, *SHAPE)).astype(np.float32), eval=rng.normal(0, 1, (24, *SHAPE)).astype(np.float32))
    return arrays


def _assert_bit_exact_with_tflite(metrics: dict) -> None:
    assert metrics["simulate.reference_agreement"] == 1.0 and metrics["simulate.layer_agreement_min"] == 1.0
    assert metrics["simulate.layer_max_lsb_difference"] == 0 and metrics["codegen.bitexact"] == 1.0


@pytest.mark.parametrize("kind, method, target", [("int8", "qat", "host"), ("float", "minmax", "host"), ("int8", "qat", "host_tflm"),
                                                  ("int8", "qat", "accel_bias_by_the_alu")])
def test_every_operator_runs_all_eight_stages_bit_exact_with_tflites_reference_kernels(converted, workspace, tmp_path, kind, method,
                                                                                      target):
    """The converted every-layer model (every operator the reader takes) as the int8 file calibrated as trained,
    and as the float file calibrated by our PTQ: its IR is the .tflite emit_ir writes, simulate compares every
    layer with TFLite's reference kernels on that file, codegen's C with the simulator; and the IR has a layer
    of every operation of the tflite_int8 dialect (pad: the writer's, for ZeroPadding2D's one-sided padding)."""
    arrays = _arrays(tmp_path)
    summary, artifacts = _run(workspace, converted[kind], "model.name=every_layer", "data=arrays", f"data.path={arrays}",
                              f"calib.method={method}", "until=null", target=TARGETS[target])
    _assert_bit_exact_with_tflite(summary.metrics)
    operations = {layer.operation for layer in read_ir(artifacts["emit_ir"]).layers}
    # gather reads a text model's token ids (an integer input): tests/test_models_2026.py runs it
    on_images = {name for name, op in DIALECTS["tflite_int8"].items() if QKind.INDEX not in op.annotate.inputs}
    assert operations == on_images, on_images ^ operations
    assert (artifacts["codegen"] / "model.tflite").read_bytes() == (artifacts["emit_ir"] / "model.tflite").read_bytes()


@pytest.mark.parametrize("kind", ["float", "int8"])
def test_a_flatten_on_a_dynamic_batch_is_read_with_its_shape_arithmetic_folded(workspace, tmp_path, kind):
    """TFLite's converter writes a Flatten of a model without a static batch as SHAPE, STRIDED_SLICE and PACK computing
    RESHAPE's target shape: folded at import into the constant they compute on the file's batch, every stage runs
    bit-exact with TFLite's reference kernels on the file."""
    tf.keras.utils.set_random_seed(8)
    inputs = tf.keras.Input(SHAPE)
    x = tf.keras.layers.Conv2D(6, 3, strides=2, activation="relu")(inputs)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(4)(tf.keras.layers.Flatten()(x)))
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if kind == "int8":
        samples = np.random.default_rng(2).normal(0, 1, (16, *SHAPE)).astype(np.float32)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([sample[np.newaxis]] for sample in samples)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    path = tmp_path / f"flatten_{kind}.tflite"
    path.write_bytes(converter.convert())
    written = Interpreter(model_path=str(path))
    assert {"SHAPE", "PACK"} <= {detail["op_name"] for detail in written._get_ops_details()}  # the file computes the shape
    assert not {"SHAPE", "PACK"} & {operator.name for operator in read_tflite(path).operators}
    summary, _ = _run(workspace, path, f"model.name=flatten_{kind}", "data=arrays", f"data.path={_arrays(tmp_path)}",
                      "calib.method=qat" if kind == "int8" else "calib.method=minmax", "until=null")
    _assert_bit_exact_with_tflite(summary.metrics)


def _renamed(data: bytes, pattern: str, replacement: str) -> bytes:
    """The .tflite with each tensor name `re.sub(pattern, replacement, name)`."""
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(data))
    for tensor in model.subgraphs[0].tensors:
        name = tensor.name.decode() if isinstance(tensor.name, bytes) else tensor.name
        tensor.name = re.sub(pattern, replacement, name)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def test_a_file_named_as_litert_torch_names_its_tensors_runs_all_eight_stages(workspace, tmp_path):
    """Tensor names of Python module paths hundreds of characters long (params files used to be named after them: "File
    name too long") and starting `__main__.` (TensorFlow refused them as scope names): the IR keeps the names, its files
    are under a short prefix and a digest, and every stage runs bit-exact."""
    module = "torchvision.models.mobilenetv3.MobileNetV3_torch.nn.modules.container.Sequential_features_" * 3
    inputs = tf.keras.Input(SHAPE, batch_size=1)  # a static batch, as litert-torch exports
    x = tf.keras.layers.Conv2D(6, 3, activation="relu", name=f"{module}conv")(inputs)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3, name="head")(tf.keras.layers.Flatten()(x)))
    path = tmp_path / "module_names.tflite"
    path.write_bytes(_renamed(tf.lite.TFLiteConverter.from_keras_model(model).convert(), r"^[^/;]*/(flatten)", r"__main__.M5/\1"))
    assert max(len(tensor.name) for tensor in read_tflite(path).tensors) > 255
    summary, artifacts = _run(workspace, path, "model.name=module_names", "data=arrays", f"data.path={_arrays(tmp_path)}",
                              "calib.method=minmax", "until=null")
    _assert_bit_exact_with_tflite(summary.metrics)
    names = [layer.name for layer in read_ir(artifacts["emit_ir"]).layers]
    assert any(len(name) > 255 for name in names) and any("M5" in name for name in names), names
    files = [file.name for file in (artifacts["emit_ir"] / "params").iterdir()]
    assert files and max(len(name.encode()) for name in files) <= PARAM_NAME_CHARACTERS + 24 < 255, files  # a kind and .npy


@pytest.mark.parametrize("target", ["accel_tflite", "tf2ir"])
def test_a_max_pools_padv2_a_slice_and_a_sum_of_a_1x1_map_as_litert_torch_writes_them_run_all_eight_stages(workspace, tmp_path, target):
    """litert-torch writes a max pool's padding as PADV2 by -inf, a crop as SLICE and the global average pool of a 1x1
    map as SUM (of one element: the mean, which TensorFlow's converter folds away): a float file of CONV_2D, PADV2,
    MAX_POOL_2D, SLICE to a 1x1 map, SUM, RESHAPE and FULLY_CONNECTED, built here, runs every stage bit-exact with
    TFLite's kernels on the accelerator's target (its .tflite writes the pool's padding as PADV2 by int8's lowest) and
    on TF2IR (their int8 arithmetic: tests/test_conformance.py, test_runtimes.py)."""
    rng = np.random.default_rng(4)
    shape, kernel = (5, 5, SHAPE[2]), (8, 3, 3, SHAPE[2])
    pool = ("Pool2DOptions", {"padding": 1, "strideW": 1, "strideH": 1, "filterWidth": 3, "filterHeight": 3, "fusedActivationFunction": 0})
    constant = lambda values, dtype=np.int32: Tensor(np.shape(values), dtype, data=np.asarray(values, dtype))  # noqa: E731
    tensors = [Tensor((1, *shape), np.float32), constant(rng.normal(0, 0.3, kernel), np.float32), constant(rng.normal(0, 0.1, 8), np.float32),
               Tensor((1, 3, 3, 8), np.float32), constant([[0, 0], [1, 1], [1, 1], [0, 0]]), constant(-np.inf, np.float32),
               Tensor((1, 5, 5, 8), np.float32), Tensor((1, 3, 3, 8), np.float32),
               constant([0, 1, 2, 0]), constant([-1, 1, 1, -1]), Tensor((1, 1, 1, 8), np.float32),
               constant([1, 2]), Tensor((1, 1, 1, 8), np.float32), constant([-1, 8]), Tensor((1, 8), np.float32),
               constant(rng.normal(0, 0.5, (3, 8)), np.float32), constant(np.zeros(3), np.float32), Tensor((1, 3), np.float32)]
    operators = [("CONV_2D", [0, 1, 2], 3, ("Conv2DOptions", {"padding": 1, "strideW": 1, "strideH": 1, "fusedActivationFunction": 0})),
                 ("PADV2", [3, 4, 5], 6, None), ("MAX_POOL_2D", [6], 7, pool), ("SLICE", [7, 8, 9], 10, None),
                 ("SUM", [10, 11], 12, ("ReducerOptions", {"keepDims": True})),
                 ("RESHAPE", [12, 13], 14, ("ReshapeOptions", {"newShape": [-1, 8]})),
                 ("FULLY_CONNECTED", [14, 15, 16], 17, ("FullyConnectedOptions", {"fusedActivationFunction": 0}))]
    path = tmp_path / "from_litert_torch.tflite"
    path.write_bytes(model_bytes(tensors, operators, [0], [17]))
    arrays = tmp_path / "arrays.npz"
    np.savez(arrays, calib=rng.normal(0, 1, (16, *shape)).astype(np.float32), eval=rng.normal(0, 1, (24, *shape)).astype(np.float32))
    summary, artifacts = _run(workspace, path, "model.name=from_litert_torch", "data=arrays", f"data.path={arrays}", "until=null",
                              "calib.method=minmax", target=(f"target={target}",))
    assert summary.metrics["codegen.bitexact"] == 1.0
    if target != "tf2ir":
        _assert_bit_exact_with_tflite(summary.metrics)
    layers = {layer.operation: layer for layer in read_ir(artifacts["emit_ir"]).layers}
    assert {"crop", "avg_pool", "max_pool"} <= set(layers) and "pad" not in layers, sorted(layers)
    assert layers["max_pool"].padding.as_list() == [1, 1, 1, 1]


def test_an_exp_runs_all_eight_stages_bit_exact_and_tflm_is_refused_before_calibration(workspace, tmp_path):
    """EXP (MobileViT's, as litert-torch writes it) on int8: a table as LiteRT computes it, every stage bit-exact; TFLM has
    no int8 EXP, so that runtime is refused before calibration, naming the one that has it."""
    tf.keras.utils.set_random_seed(10)
    inputs = tf.keras.Input(SHAPE)
    x = tf.keras.layers.Conv2D(6, 3, strides=2)(inputs)
    x = tf.keras.layers.Lambda(lambda t: tf.exp(t))(x)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(tf.keras.layers.Flatten()(x)))
    path = tmp_path / "exp.tflite"
    path.write_bytes(_convert(model, quantized=True))
    assert "EXP" in {operator.name for operator in read_tflite(path).operators}
    summary, _ = _run(workspace, path, "model.name=exp", "data=arrays", f"data.path={_arrays(tmp_path)}", "until=null", "calib.method=qat")
    _assert_bit_exact_with_tflite(summary.metrics)
    with pytest.raises(StageFailed, match=r"(?s)nothing was calibrated.*EXP.*tflm.*litert_reference"):
        _run(workspace, path, "model.name=exp", "data=arrays", f"data.path={_arrays(tmp_path)}", "calib.method=qat",
             target=("target=tflite_int8", "target.scheme.runtime=tflm"))


def test_a_sum_of_several_elements_is_refused_at_import_naming_the_operator(tmp_path):
    tensors = [Tensor((1, 2, 2, 8), np.float32), Tensor((2,), np.int32, data=np.array([1, 2], np.int32)), Tensor((1, 1, 1, 8), np.float32)]
    path = tmp_path / "sum.tflite"
    path.write_bytes(model_bytes(tensors, [("SUM", [0, 1], 2, ("ReducerOptions", {"keepDims": True}))], [0], [2]))
    with pytest.raises(TfliteError, match=r"sum.tflite: operator 0 \(SUM\) over axes \[1, 2\] of a \[1, 2, 2, 8\] tensor adds several"):
        tflite_graph_def(read_tflite(path))


def test_a_vector_input_runs_all_eight_stages_on_tflm(workspace, tmp_path):
    """A rank-2 input ([N, 8]) through TFLM's RELU_N1_TO_1 (three layers here): its program reads the [N, 8] samples as the
    [N, 1, 1, 8] images its dense layers take, the same bytes (round 4: codegen refused them after seven stages)."""
    path = tmp_path / "vector.tflite"
    path.write_bytes(one_operator_model("RELU_N1_TO_1", [Tensor((1, 8), np.int8, 0.02, 3)], Tensor((1, 8), np.int8, 0.01, -2)))
    rng = np.random.default_rng(0)
    np.savez(arrays := tmp_path / "vectors.npz", calib=rng.normal(0, 1, (33, 8)).astype(np.float32),
             eval=rng.normal(0, 1, (33, 8)).astype(np.float32))
    summary, _ = _run(workspace, path, "model.name=vector", "data=arrays", f"data.path={arrays}", "calib.method=qat", "until=null",
                      target=("target=tflite_int8", "target.scheme.runtime=tflm"))
    _assert_bit_exact_with_tflite(summary.metrics)
    assert summary.metrics["codegen.images"] == 34


def test_a_transpose_that_repeats_an_axis_is_refused_at_import_naming_its_permutation(tmp_path):
    """LiteRT's TRANSPOSE runs perm [0, 0, 0, 0] (it checks each axis' range only); it is no transpose: refused by name."""
    tensors = [Tensor((1, 2, 3, 4), np.float32), Tensor((4,), np.int32, data=np.zeros(4, np.int32)), Tensor((1, 1, 1, 1), np.float32)]
    path = tmp_path / "transpose.tflite"
    path.write_bytes(model_bytes(tensors, [("TRANSPOSE", [0, 1], 2, None)], [0], [2]))
    with pytest.raises(TfliteError, match=r"transpose.tflite: operator 0 \(TRANSPOSE\) by \[0, 0, 0, 0\], not a permutation of the 4 axes"):
        tflite_graph_def(read_tflite(path))


@pytest.mark.parametrize("operator, operands, kernel", [
    ("RELU", [(np.int16, 0.001)], "activations.cc"),
    ("ADD", [(np.int8, 0.01), (np.int16, 0.001)], "add.cc"),
])
def test_an_operator_of_int8_and_int16_activations_is_refused_at_import_as_litert_refuses_it(tmp_path, operator, operands, kernel):
    """An INT8 tensor beside INT16 ones in one operator (round 4: read green, then called INT16): refused naming both."""
    path = tmp_path / "mixed.tflite"
    path.write_bytes(one_operator_model(operator, [Tensor((1, 8), dtype, scale, 0) for dtype, scale in operands], Tensor((1, 8), np.int8, 0.01, 0)))
    with pytest.raises(TfliteError, match=rf"mixed.tflite: operator 0 \({operator}\) computes on the tensors 0 \(tensor_0\) "
                                          rf"{'INT16' if operands[0][0] == np.int16 else 'INT8'}, .*INT8; LiteRT's {operator} kernel "
                                          "takes one type throughout"):
        tflite_graph_def(read_tflite(path))
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    with pytest.raises(RuntimeError, match=rf"{kernel}.*type"):  # LiteRT's own refusal
        Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF).allocate_tensors()


def test_a_gather_by_float_positions_is_refused_at_import_as_litert_refuses_it(tmp_path):
    tensors = [Tensor((1, 3), np.float32), Tensor((5, 4), np.float32, data=np.ones((5, 4), np.float32)), Tensor((1, 3, 4), np.float32)]
    path = tmp_path / "gather.tflite"
    path.write_bytes(model_bytes(tensors, [("GATHER", [1, 0], 2, ("GatherOptions", {"axis": 0}))], [0], [2]))
    with pytest.raises(TfliteError, match=r"gather.tflite: operator 0 \(GATHER\) reads the FLOAT32 tensor 0 \(tensor_0\) as its input 1, "
                                          r"an index; LiteRT's kernel takes INT32 or INT64 there"):
        tflite_graph_def(read_tflite(path))
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    with pytest.raises(RuntimeError, match="Positions of type .FLOAT32. are not supported by gather"):  # LiteRT's own refusal
        Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF).allocate_tensors()


@needs_resnet8
@pytest.mark.parametrize("target", [
    # the ALU's bias placement on this model runs with --slow (the every-operator test above covers it by default)
    pytest.param(name, marks=pytest.mark.slow) if name == "accel_bias_by_the_alu" else name
    for name in TARGETS if name != "host_tflm"])  # TFLite Micro's: tests/test_mlperf_tiny_tflm.py
def test_mlcommons_resnet8_runs_all_eight_stages_and_its_program_gives_tflites_every_output_byte(workspace, tmp_path, target):
    """The issue's headline: MLCommons' int8 ResNet-8 as trained, every stage; simulate's top-1 on the 846 test
    images is the reference kernels' 744; the generated program, run on all 846 images, gives every output byte
    TFLite's reference kernels give on MLCommons' own file: on the host, and on the accelerator (every MAC there,
    host C driving the ISA simulator) with either of seed 004 Fig. 4's bias placements."""
    summary, artifacts = _run(workspace, RESNET8, "model.preprocess.scale=1", "model.preprocess.offset=0", "calib.method=qat",
                              f"data.path={CIFAR10_DIR}", "until=null", target=TARGETS[target])
    _assert_bit_exact_with_tflite(summary.metrics)
    if target != "host":  # every conv, add, pool, the flatten (a DMA copy) and the softmax on the accelerator
        assert summary.metrics["partition.mac_share_accel"] >= 0.9 and summary.metrics["partition.layers_accel"] == 16
        assert (summary.metrics["codegen.accel_count_gemm_reset"] == 0) == (target == "accel_bias_in_accumulators")
    assert summary.metrics["simulate.images"] == 846 and round(summary.metrics["simulate.top1"] * 846) == 744
    images, labels = load_cifar10(CIFAR10_DIR, "test_batch")
    inputs = (images.astype(np.int16) - 128).astype(np.int8)  # the file's input: pixel - 128 (scale 1, zero point -128)
    ir = read_ir(artifacts["emit_ir"])
    program = generate_program(ir, read_plan(artifacts["partition"] / PLAN_FILE))
    binary = compile_program(program.write(tmp_path / "program"))
    (end_point,) = program.end_points
    ours = run_program(binary, program, inputs, tmp_path / "run").outputs[end_point].reshape(len(inputs), -1)
    model = read_tflite(RESNET8)
    theirs = reference_tensors(RESNET8, inputs)[model.outputs[0]]
    assert np.array_equal(ours, theirs) and int(np.sum(ours.argmax(axis=1) == labels)) == 744


def test_a_simulator_that_differs_from_tflite_stops_simulate_naming_the_first_layer(workspace, monkeypatch):
    """simulate is the check: a kernel off by one LSB (the convolutions', on the built-in digits model) must stop
    the stage, naming the first layer and TFLite's reference kernels."""
    conv = OPS["conv"]

    def off_by_one(layer, params, inputs):
        return np.clip(conv.kernel(layer, params, inputs).astype(np.int16) + 1, -128, 127).astype(np.int8)

    monkeypatch.setitem(OPS, "conv", dataclasses.replace(conv, kernel=off_by_one, fast_kernel=None))
    with pytest.raises(StageFailed, match=r"stage simulate failed: layer \S+ \(operator \d+ of .*model.tflite\) differs from LiteRT's "
                                          r"reference kernels \(target.scheme.runtime=litert_reference\) on \d+\.\d+% of its values \(up to 1 LSB\)"):
        run_pipeline(compose(*workspace, "target=tflite_int8", "until=simulate"), console=Console(file=io.StringIO(), width=400))
