"""Annotation (simulated quantization) on the real QAT graphs and on a small float graph.

The strongest check available: the QAT graphs were trained with exactly the
FakeQuants the IR implies, so removing theirs (`bypass_fake_quant`) and
annotating with their own ranges (the table of `calib.method=qat`) must rebuild the
same computation, bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from conftest import CIFAR10_DIR, MBV1_GRAPH, MODELS, SSD_GRAPH
from core.frontend.fake_quant import FAKE_QUANT, FAKE_QUANT_PER_CHANNEL
from core.quantize.annotate import AnnotateError, annotate_graph, export_frozen_graph
from core.quantize.table import CalibrationTable, TensorEntry
from core.data.datasets import load_cifar10, load_image, preprocess
from core.quantize.calibration.methods import CalibrationSettings
from core.quantize.calibration.build import CalibrationError, TargetSpec, build_calibration_table, qat_range_changes
from core.quantize.schemes import Pow2Symmetric
from core.quantize.evaluation import SQNR_CAP_DB, compare, layer_tensor_pairs, sqnr_db
from core.reports.layers import plot_layer_sqnr
from core.frontend.constant_folding import fold_constants
from core.frontend.folding import fold_batch_norms
from core.frontend.graph import Graph, canonical_tensor, tensor_node
from core.frontend.importer import import_graph, load_graph_def
from core.frontend.fake_quant import QuantRange, bypass_fake_quant
from core.ir.layers import group_layers
from core.ir.ops import OPS
from core.frontend.tf_runtime import GraphRunner

MBV1_INPUT = "images:0"
MBV1_END = "MobilenetV1/Dense/act_quant/FakeQuantWithMinMaxVars:0"
SSD_INPUT = "normalized_input_image_tensor:0"
SSD_END_POINTS = [f"BoxPredictor_{k}/Reshape{suffix}:0" for k in range(6) for suffix in ("", "_1")]
CIFAR_PREPROCESS = {"size": [128, 128], "resize": "tf_bilinear", "scale": 127.5, "offset": -1.0}


def _import(path, input_tensor, end_points) -> Graph:
    loaded = load_graph_def("frozen_graph", path)
    return import_graph(loaded.graph_def, input_tensor, end_points, origin=str(path), source={})


def _fold(graph: Graph) -> Graph:
    return fold_batch_norms(fold_constants(graph)).graph


def _qat_setup(original: Graph):
    float_graph, ranges = bypass_fake_quant(_fold(original))
    layer_graph = group_layers(float_graph)
    return layer_graph, qat_calibration_table(layer_graph, ranges)


def qat_calibration_table(layer_graph, ranges):
    # the shipped QAT graphs take [-1, 1) with no FakeQuant on their input: without statistics, TF2IR's input scale
    return build_calibration_table(layer_graph, "qat", TargetSpec("tf2ir", Pow2Symmetric(input_log2scale=7)), CalibrationSettings(), None, ranges)


def _on_input_grid(images: np.ndarray) -> np.ndarray:
    """Images as the IR takes them: int8 at log2scale 7. The table quantizes the network input
    (the IR does), the QAT graph does not: fed values already on that grid, the two agree exactly."""
    return (np.clip(np.floor(images * 128.0 + 0.5), -128, 127) / 128.0).astype(np.float32)


def _count(graph: Graph, *ops: str) -> int:
    return sum(node.op in ops for node in graph.nodes)


@pytest.fixture(scope="module")
def mbv1():
    original = _import(MBV1_GRAPH, MBV1_INPUT, [MBV1_END])
    layer_graph, table = _qat_setup(original)
    return original, layer_graph, table, annotate_graph(layer_graph, table)


@pytest.fixture(scope="module")
def ssd():
    original = _import(SSD_GRAPH, SSD_INPUT, SSD_END_POINTS)
    layer_graph, table = _qat_setup(original)
    return original, layer_graph, table, annotate_graph(layer_graph, table)


@pytest.fixture(scope="module")
def cifar():
    images, labels = load_cifar10(CIFAR10_DIR, "test_batch")
    return preprocess(images[:200], CIFAR_PREPROCESS), labels[:200]


# --- the QAT graphs rebuilt exactly ---------------------------------------------
def test_qat_table_reads_power_of_two_ranges(mbv1):
    _, layer_graph, table, _ = mbv1
    weights = sum(1 for layer in layer_graph.layers if layer.weight)
    assert table.method == "qat" and table.target == "tf2ir" and table.bits == 8
    # the IR takes its input in int8 at log2scale 7; the table says so, as for every method
    assert (table.tensors[MBV1_INPUT].kind, table.tensors[MBV1_INPUT].log2scale) == ("input", 7)
    assert len(table.tensors) == len(layer_graph.quantized_tensors()) + 2 * weights
    first = table.tensors["MobilenetV1/Conv_0/Relu6:0"]
    assert (first.range, first.log2scale, first.threshold, first.kind) == ([-8.0, 7.9375], 4, 8.0, "activation")
    assert first.layer == "MobilenetV1/Conv_0/Conv2D_Fold"
    assert table.tensors["MobilenetV1/Conv_0/mul_fold:0"].kind == "weight"


def test_annotated_mbv1_equals_the_qat_graph_exactly(mbv1, cifar):
    original, _, _, annotated = mbv1
    images = _on_input_grid(cifar[0][:4])
    with GraphRunner(original) as runner:
        (expected,) = runner.run(original.end_points, images, batch_size=3)  # two batches
    with GraphRunner(annotated) as runner:
        (got,) = runner.run(annotated.end_points, images, batch_size=3)
    assert np.array_equal(expected, got)
    assert _count(annotated, FAKE_QUANT) == _count(original, FAKE_QUANT) + 1 == 86  # + the input's


def _ssd_input(path) -> np.ndarray:
    """As the original tool fed it: PIL bilinear resize to 160x160, then x/128 - 1."""
    from PIL import Image

    image = Image.fromarray(load_image(path)).resize((160, 160), Image.BILINEAR)
    return (np.asarray(image).astype(np.float32) / 128.0 - 1.0)[np.newaxis]


def test_annotated_ssd_equals_the_qat_graph_exactly(ssd):
    original, _, _, annotated = ssd
    x = _on_input_grid(_ssd_input(MODELS / "mobilenet_v2_ssd_0.25_160" / "test.jpg"))
    with GraphRunner(original) as runner:
        expected = runner.run(original.end_points, x)
    with GraphRunner(annotated) as runner:
        got = runner.run(annotated.end_points, x)
    assert annotated.end_points == SSD_END_POINTS
    assert all(np.array_equal(e, g) for e, g in zip(expected, got))
    assert _count(annotated, FAKE_QUANT) == _count(original, FAKE_QUANT) + 1 == 228  # + the input's
    # more images: the input placeholder is [1,160,160,3], so they run one by one
    more = _on_input_grid(np.concatenate([x] + [_ssd_input(MODELS / name) for name in ("motor.jpg", "oiltank.jpg")]))
    same = compare(original, annotated, {}, more, batch_size=8)
    assert same.num_images == 3 and same.top1_float is None
    assert all(item.sqnr_db == SQNR_CAP_DB for item in same.end_points)


def test_top1_of_annotated_mbv1_equals_the_original_and_layers_are_measured(mbv1, cifar, tmp_path):
    original, layer_graph, _, annotated = mbv1
    images, labels = cifar
    images = _on_input_grid(images)
    same = compare(original, annotated, {}, images, labels, batch_size=64)
    assert same.num_images == 200 and same.top1_float == same.top1_annotated and same.top1_agreement == 1.0
    assert 0.5 < same.top1_float <= 1.0
    assert same.end_points[0].sqnr_db == SQNR_CAP_DB and same.end_points[0].cosine == pytest.approx(1.0)

    pairs = layer_tensor_pairs(layer_graph, annotated)
    assert len(pairs) == len(layer_graph.layers)  # every mbv1 layer output is quantized
    versus_float = compare(layer_graph.graph, annotated, pairs, images[:32], labels[:32], batch_size=16)
    assert list(versus_float.per_layer_sqnr_db) == [layer.ir_name for layer in layer_graph.layers]  # the IR's names, as simulate's
    assert all(10.0 < value < SQNR_CAP_DB for value in versus_float.per_layer_sqnr_db.values())
    plot = plot_layer_sqnr(versus_float.per_layer_sqnr_db, tmp_path / "sqnr.png", "mbv1 qat")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_export_reimport_fold_gives_the_same_table(mbv1, tmp_path):
    _, layer_graph, table, annotated = mbv1
    path = export_frozen_graph(annotated, tmp_path / "annotated.pb")
    (end_point,) = annotated.end_points
    assert end_point == "MobilenetV1/Dense/add_fold/act_quant/FakeQuantWithMinMaxVars:0"
    reimported = _import(path, MBV1_INPUT, [end_point])
    again_layers, again_table = _qat_setup(reimported)
    assert [layer.name for layer in again_layers.layers] == [layer.name for layer in layer_graph.layers]
    assert again_table.tensors == table.tensors


# --- the rules ------------------------------------------------------------------
def test_ssd_reshape_gets_no_fake_quant_of_its_own(ssd):
    _, layer_graph, _, annotated = ssd
    by_name = annotated.by_name()
    for layer in (layer for layer in layer_graph.layers if layer.op == "reshape"):
        assert OPS["reshape"].annotate.output.name == "IDENTITY"
        assert not any(node.op == FAKE_QUANT and canonical_tensor(node.inputs[0]) == layer.output for node in annotated.nodes)
        assert layer.output in annotated.end_points  # the end point still names the reshape itself
        reads = by_name[layer.name].inputs[0]
        assert by_name[tensor_node(reads)].op == FAKE_QUANT  # it reshapes the conv's quantized output
        assert tensor_node(reads) == f"{tensor_node(layer.inputs[0])}/act_quant/{FAKE_QUANT}"


def _build_small_float_graph() -> Graph:
    """conv -> (dwconv x2 multiplier -> conv) + conv's output -> add -> max_pool -> mean -> conv -> reshape:
    a multi-referenced tensor, every annotated op kind, and an IDENTITY op at the end."""
    rng = np.random.default_rng(0)

    def const(shape, name, scale=0.5):
        return tf.constant(rng.normal(0.0, scale, shape).astype(np.float32), name=name)

    with tf.Graph().as_default() as tf_graph:
        images = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 3], name="images")
        conv = tf.nn.conv2d(images, const([3, 3, 3, 8], "conv/weights"), 1, "SAME", name="conv/Conv2D")
        conv = tf.nn.relu6(tf.nn.bias_add(conv, const([8], "conv/bias"), name="conv/BiasAdd"), name="conv/Relu6")
        dw = tf.nn.depthwise_conv2d(conv, const([3, 3, 8, 2], "dw/weights"), [1, 1, 1, 1], "SAME", name="dw/depthwise")
        dw = tf.nn.relu6(tf.nn.bias_add(dw, const([16], "dw/bias"), name="dw/BiasAdd"), name="dw/Relu6")
        project = tf.nn.conv2d(dw, const([1, 1, 16, 8], "project/weights"), 1, "SAME", name="project/Conv2D")
        project = tf.nn.bias_add(project, const([8], "project/bias"), name="project/BiasAdd")
        added = tf.nn.relu6(tf.add(conv, project, name="add/Add"), name="add/Relu6")
        pooled = tf.nn.max_pool2d(added, 2, 2, "VALID", name="pool/MaxPool")
        mean = tf.reduce_mean(pooled, [1, 2], keepdims=True, name="gap/Mean")
        logits = tf.nn.conv2d(mean, const([1, 1, 8, 10], "logits/weights"), 1, "SAME", name="logits/Conv2D")
        logits = tf.nn.bias_add(logits, const([10], "logits/bias"), name="logits/BiasAdd")
        tf.reshape(logits, [-1, 10], name="logits/Reshape")
    graph = Graph.from_graph_def(tf_graph.as_graph_def(), MBV1_INPUT, ["logits/Reshape:0"])
    graph.infer_shapes()
    return graph


@pytest.fixture(scope="module")
def small():
    layer_graph = group_layers(_build_small_float_graph())
    assert [layer.op for layer in layer_graph.layers] == ["conv", "dwconv", "conv", "add", "max_pool", "avg_pool", "conv", "reshape"]
    x = np.random.default_rng(1).uniform(-1.0, 1.0, (8, 8, 8, 3)).astype(np.float32)
    tensors = layer_graph.quantized_tensors()
    absmax = {t: float(np.abs(v).max()) for t, v in zip(tensors, GraphRunner(layer_graph.graph).run(tensors, x))}
    for layer in layer_graph.layers:
        for const in (layer.weight, layer.bias):
            if const:
                absmax[f"{const}:0"] = float(np.abs(layer_graph.graph.constants[const]).max())
    return layer_graph, x, absmax


def _po2_entry(absmax: float, kind: str, bits: int = 8) -> TensorEntry:
    k = math.ceil(math.log2(absmax))
    return TensorEntry(kind, "absmax", 2.0**k, [-(2.0**k), 2.0**k - 2.0 ** (k - bits + 1)], log2scale=bits - 1 - k)


def test_per_tensor_table_annotates_every_tensor_weight_and_bias_once(small):
    layer_graph, x, absmax = small
    table = CalibrationTable("absmax", "tf2ir", 8, {t: _po2_entry(a, "activation") for t, a in absmax.items()})
    # the quantization structure alone: no integer model replacing the add's float arithmetic
    annotated = annotate_graph(layer_graph, table, integer_models=False)
    fake_quants = [node for node in annotated.nodes if node.op == FAKE_QUANT]
    quantized = [canonical_tensor(node.inputs[0]) for node in fake_quants]
    assert sorted(quantized) == sorted(absmax)  # each activation, weight and bias exactly once
    assert "images/input_quant/FakeQuantWithMinMaxVars" in annotated.by_name()
    assert "conv/Conv2D/weights_quant/FakeQuantWithMinMaxVars" in annotated.by_name()
    assert "dw/depthwise/bias_quant/FakeQuantWithMinMaxVars" in annotated.by_name()
    # nothing reads an unquantized tensor any more: only its FakeQuant does
    for tensor in absmax:
        readers = [node.name for node in annotated.nodes if tensor in map(canonical_tensor, node.inputs)]
        assert len(readers) == 1 and annotated.node(readers[0]).op == FAKE_QUANT, (tensor, readers)
    # the multi-referenced conv output is quantized once and shared by dwconv and add
    shared = "conv/Relu6/act_quant/FakeQuantWithMinMaxVars:0"
    assert {node.name for node in annotated.nodes if shared in node.inputs} == {"dw/depthwise", "add/Add"}
    # every quantized activation lies on its int8 grid
    pairs = layer_tensor_pairs(layer_graph, annotated)
    values = GraphRunner(annotated).run([q for _, q in pairs.values()], x)
    for (tensor, _), value in zip(pairs.values(), values):
        steps = value * 2.0 ** table.tensors[tensor].log2scale
        assert np.array_equal(steps, np.round(steps)) and steps.min() >= -128 and steps.max() <= 127
    assert annotated.end_points == ["logits/Reshape:0"]


def test_missing_activation_entry_is_named(small):
    layer_graph, _, absmax = small
    tensors = {t: _po2_entry(a, "activation") for t, a in absmax.items() if t != "add/Relu6:0"}
    with pytest.raises(AnnotateError, match="add/Relu6:0"):
        annotate_graph(layer_graph, CalibrationTable("absmax", "tf2ir", 8, tensors))
    partial = annotate_graph(layer_graph, CalibrationTable("absmax", "tf2ir", 8, tensors), allow_missing=True)
    assert _count(partial, FAKE_QUANT) == len(absmax) - 1


def _fake_quant_reference(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """FakeQuant on an exact symmetric grid (no nudging needed): last axis per channel."""
    scale = (high - low) / 255.0
    return np.clip(np.floor(values / scale + 0.5), -128, 127) * scale


def test_per_channel_table_quantizes_conv_and_depthwise_weights_per_output_channel(small):
    layer_graph, x, absmax = small
    constants = layer_graph.graph.constants
    tensors, scales = {}, {}
    for tensor, value in absmax.items():  # float-scale activations: [-128 s, 127 s] with s = absmax / 127
        scales[tensor] = value / 127.0
        tensors[tensor] = TensorEntry("activation", "absmax", value, [-128 * scales[tensor], 127 * scales[tensor]], scale=scales[tensor])
    for layer in (layer for layer in layer_graph.layers if layer.weight):
        weights = constants[layer.weight]
        per_channel = np.abs(weights.reshape(-1, weights.shape[2] * weights.shape[3]) if layer.op == "dwconv"
                             else weights.reshape(-1, weights.shape[3])).max(axis=0) / 127.0
        tensors[f"{layer.weight}:0"] = TensorEntry("weight", "absmax", 0.0, [-1.0, 1.0], channel_ranges=[[-128 * s, 127 * s] for s in per_channel],
                                                   channel_scales=per_channel.tolist())
        bias_scales = scales[layer.inputs[0]] * per_channel
        tensors[f"{layer.bias}:0"] = TensorEntry("bias", "absmax", 0.0, None, channel_scales=bias_scales.tolist())
    table = CalibrationTable("absmax", "float", 8, tensors)
    annotated = annotate_graph(layer_graph, table)
    assert _count(annotated, FAKE_QUANT_PER_CHANNEL) == 4
    assert _count(annotated, FAKE_QUANT) == len(layer_graph.quantized_tensors())

    dw = next(layer for layer in layer_graph.layers if layer.op == "dwconv")
    conv = layer_graph.layers[0]
    fetched = GraphRunner(annotated).run(
        [annotated.source["annotation"]["weights"][f"{conv.weight}:0"], annotated.source["annotation"]["weights"][f"{dw.weight}:0"]], x[:1])
    for layer, got in zip((conv, dw), fetched):
        weights = constants[layer.weight]
        ranges = np.asarray(tensors[f"{layer.weight}:0"].channel_ranges)
        flat = weights.reshape(*weights.shape[:2], -1) if layer.op == "dwconv" else weights  # output channel c*M + m last
        expected = _fake_quant_reference(flat.astype(np.float64), ranges[:, 0], ranges[:, 1]).reshape(weights.shape)
        assert got.shape == weights.shape and np.allclose(got, expected, rtol=0, atol=1e-6)
        assert not np.array_equal(got, weights)
    # the bias is a Const on its int32 grid, read by the BiasAdd in place of the original
    bias_const = tensor_node(annotated.source["annotation"]["biases"][f"{dw.bias}:0"])
    assert bias_const == f"{dw.name}/bias_quant/quantized" and dw.bias not in annotated.constants
    steps = annotated.constants[bias_const] / np.asarray(tensors[f"{dw.bias}:0"].channel_scales)
    assert np.allclose(steps, np.round(steps), atol=1e-3)
    assert sqnr_db(GraphRunner(layer_graph.graph).run(layer_graph.graph.end_points, x)[0],
                   GraphRunner(annotated).run(annotated.end_points, x)[0]) > 20.0


# --- qat ranges the target cannot take -------------------------------------------
@pytest.mark.parametrize("qat_range, rounding, log2scale", [
    (QuantRange(-6.0, 5.953125), "ceil", 4),  # |6| -> 8 = 128 * 2^-4
    (QuantRange(-5.0, 5.0), "nearest", 5),  # log2 5 = 2.3 -> 2: 4 = 128 * 2^-5, clipping what lies beyond 4
    (QuantRange(-8.0, 8.0), "ceil", 4),  # a symmetric range of 2^k: 8 -> 8
    (QuantRange(-127 / 16, 127 / 16, narrow_range=True), "ceil", 4),  # tfmot's narrow weights: [-127, 127] steps of 1/16
    (QuantRange(-0.5, 3.0), "nearest", 5),  # asymmetric: its largest magnitude, 3 -> 4 = 128 * 2^-5
])
def test_a_qat_range_that_is_not_a_power_of_two_is_rounded_and_reported(mbv1, qat_range, rounding, log2scale):
    _, layer_graph, _, _ = mbv1
    ranges = bypass_fake_quant(_fold(mbv1[0]))[1]
    tensor = layer_graph.layers[2].output
    ranges[tensor] = qat_range
    table = build_calibration_table(layer_graph, "qat", TargetSpec("tf2ir", Pow2Symmetric(input_log2scale=7, pow2_rounding=rounding)), CalibrationSettings(), None, ranges)
    assert table.tensors[tensor].log2scale == log2scale
    assert table.tensors[tensor].range == [-128 * 2.0**-log2scale, 127 * 2.0**-log2scale]
    changes = {change["tensor"]: change for change in qat_range_changes(table, layer_graph, ranges)}
    assert changes[tensor]["qat_range"] == [qat_range.min, qat_range.max] and changes[tensor]["range"] == table.tensors[tensor].range
    assert set(changes) == {tensor}  # the graph's own power-of-two ranges are kept as they are


def test_a_fake_quant_of_other_bits_than_the_target_is_refused(mbv1):
    _, layer_graph, _, _ = mbv1
    ranges = bypass_fake_quant(_fold(mbv1[0]))[1]
    tensor = layer_graph.layers[2].output
    ranges[tensor] = QuantRange(-8.0, 7.0, num_bits=4)
    with pytest.raises(CalibrationError, match=f"{tensor}.*num_bits=4"):
        qat_calibration_table(layer_graph, ranges)


def test_qat_table_names_a_layer_output_the_graph_does_not_quantize(mbv1):
    _, layer_graph, _, _ = mbv1
    ranges = bypass_fake_quant(_fold(mbv1[0]))[1]
    missing = layer_graph.layers[3].output
    del ranges[missing]
    with pytest.raises(CalibrationError, match=f"tensor {missing} .layer {layer_graph.layers[3].name}. has no FakeQuant"):
        qat_calibration_table(layer_graph, ranges)
