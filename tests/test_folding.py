"""core.frontend.folding against real TensorFlow: the two shared QAT graphs, TF1 FusedBatchNorm graphs and a frozen Keras 3 model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from core.frontend.constant_folding import constant_node_names, fold_constants
from core.frontend.fake_quant import FAKE_QUANT_OPS
from core.frontend.folding import find_batch_norms, fold_batch_norms, max_abs_difference
from core.frontend.graph import Graph, tensor_node
from core.frontend.importer import import_graph

SHARED = Path(__file__).resolve().parents[2] / "shared"
MOBILENET = SHARED / "models" / "mobilenet_v1_0.5_128_cifar10" / "graph.pb"
SSD = SHARED / "models" / "mobilenet_v2_ssd_0.25_160" / "graph.pb"
REAL_MODELS = {
    "mobilenet_v1": (MOBILENET, "images:0", ["MobilenetV1/Dense/act_quant/FakeQuantWithMinMaxVars:0"], (2, 128, 128, 3)),
    "ssd_mobilenet_v2": (
        SSD,
        "normalized_input_image_tensor:0",
        [f"BoxPredictor_{k}/Reshape{suffix}:0" for k in range(6) for suffix in ("", "_1")],
        (1, 160, 160, 3),
    ),
}
CONV_OPS = ("Conv2D", "DepthwiseConv2dNative")
FLOAT_RELATIVE_TOLERANCE = 1e-4


# --- helpers -------------------------------------------------------------------
def random_input(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape).astype(np.float32)


def import_graph_def(graph_def, input_tensor: str, end_points: list[str]) -> Graph:
    return import_graph(graph_def, input_tensor, end_points, origin="test", source={})


def fold(graph: Graph):
    return fold_batch_norms(fold_constants(graph))


def assert_close(original: Graph, folded: Graph, x: np.ndarray) -> dict:
    measured = max_abs_difference(original, folded, x)
    assert measured["max_abs_reference"] > 0.1, "the test graph's output is degenerate; the comparison would prove nothing"
    assert measured["max_abs_difference"] <= FLOAT_RELATIVE_TOLERANCE * max(1.0, measured["max_abs_reference"]), measured
    return measured


def readers_of(graph: Graph, name: str) -> list:
    return [node for node in graph.nodes if any(tensor_node(t) == name for t in node.inputs)]


def ops(graph: Graph) -> set[str]:
    return {node.op for node in graph.nodes}


def snapshot(graph: Graph) -> tuple[str, dict[str, bytes]]:
    return json.dumps([node.to_json() for node in graph.nodes]), {name: value.tobytes() for name, value in graph.constants.items()}


def fake_quant_ranges(graph: Graph, kind: str) -> dict[str, tuple[float, float]]:
    """FakeQuant name -> (min, max) for 'activation' FakeQuants (data input computed from the image) or 'constant' ones."""
    constant = set(graph.constants) | constant_node_names(graph)
    ranges = {}
    for node in graph.nodes:
        if node.op in FAKE_QUANT_OPS and (tensor_node(node.inputs[0]) in constant) == (kind == "constant"):
            ranges[node.name] = tuple(float(graph.constants[tensor_node(t)]) for t in node.inputs[1:3])
    return ranges


# --- the shared QAT graphs -----------------------------------------------------
@pytest.fixture(scope="module", params=sorted(REAL_MODELS))
def real_model(request):
    path, input_tensor, end_points, input_shape = REAL_MODELS[request.param]
    if not path.is_file():
        pytest.skip(f"shared test model not found: {path}")
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(path.read_bytes())
    original = import_graph_def(graph_def, input_tensor, end_points)
    original_before = snapshot(original)
    constants_folded = fold_constants(original)
    constants_folded_before = snapshot(constants_folded)
    result = fold_batch_norms(constants_folded)
    # neither pass may modify the graph it was given
    assert snapshot(original) == original_before and snapshot(constants_folded) == constants_folded_before
    return original, constants_folded, result, input_shape


def test_qat_batch_norm_fold_arithmetic_is_gone(real_model):
    _, _, result, _ = real_model
    graph = result.graph
    assert not ops(graph) & {"Rsqrt", "Sub", "Mul"}
    # only the constants and the bias FakeQuant (its QAT range) stay under BatchNorm_Fold/
    leftovers = [
        (node.name, node.op)
        for node in graph.nodes
        if "/BatchNorm_Fold/" in node.name and node.op != "Const" and not (node.op in FAKE_QUANT_OPS and "/bias_quant/" in node.name)
    ]
    assert leftovers == []
    assert result.unfolded == [] and find_batch_norms(graph) == []


def test_qat_convs_are_canonical_blocks(real_model):
    original, _, result, _ = real_model
    graph = result.graph
    by_name = graph.by_name()
    convs = [node for node in graph.nodes if node.op in CONV_OPS]
    assert len(convs) == sum(original.op_counts().get(op, 0) for op in CONV_OPS)
    for conv in convs:
        weights = by_name[tensor_node(conv.inputs[1])]
        assert weights.op in FAKE_QUANT_OPS and by_name[tensor_node(weights.inputs[0])].op == "Const", conv.name
        (bias_add,) = readers_of(graph, conv.name)
        assert bias_add.op == "BiasAdd" and bias_add.name.endswith("/add_fold"), (conv.name, bias_add.op)
        bias = by_name[tensor_node(bias_add.inputs[1])]
        assert bias.op in FAKE_QUANT_OPS and graph.constants[tensor_node(bias.inputs[0])].ndim == 1
    assert len(result.bias_adds) == len(convs)
    assert result.folded == []  # QAT graphs were folded by training; nothing float is left to fold


def test_qat_fake_quant_ranges_are_kept(real_model):
    original, _, result, _ = real_model
    activations = fake_quant_ranges(original, "activation")
    assert len(activations) >= 28 and fake_quant_ranges(result.graph, "activation") == activations
    assert fake_quant_ranges(result.graph, "constant") == fake_quant_ranges(original, "constant")
    assert result.graph.op_counts()["FakeQuantWithMinMaxVars"] == original.op_counts()["FakeQuantWithMinMaxVars"]


def test_qat_outputs_are_identical(real_model):
    original, _, result, input_shape = real_model
    for seed in (0, 1):
        measured = max_abs_difference(original, result.graph, random_input(input_shape, seed))
        assert measured["max_abs_reference"] > 1.0
        assert measured["max_abs_difference"] <= 1e-6, measured


def test_folded_constants_are_what_tensorflow_computes(real_model):
    """Bit-identical to the original graph's own tensor, under the name of the node it replaces."""
    original, constants_folded, _, _ = real_model
    mul_folds = [node.name for node in original.nodes if node.name.endswith("/mul_fold")]
    assert mul_folds and all(constants_folded.node(name).op == "Const" for name in mul_folds)
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.compat.v1.import_graph_def(original.to_graph_def(), name="")
    with tf.compat.v1.Session(graph=tf_graph) as session:
        expected = session.run([f"{name}:0" for name in mul_folds[:6]])
    for name, value in zip(mul_folds, expected):
        assert np.array_equal(constants_folded.constants[name], value), name


# --- float graphs: TF1 FusedBatchNorm -------------------------------------------
def batch_norm_parameters(channels: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "scale": rng.uniform(0.5, 1.5, channels).astype(np.float32),
        "offset": rng.normal(0.0, 0.5, channels).astype(np.float32),
        "mean": rng.normal(0.0, 0.5, channels).astype(np.float32),
        "variance": rng.uniform(0.2, 2.0, channels).astype(np.float32),
    }


def conv_bn_graph_def(depthwise: bool, with_bias: bool = False, epsilon: float = 0.001):
    """images -> conv (-> BiasAdd) -> FusedBatchNormV3(is_training=False) 'bn' -> Relu6 'out'."""
    rng = np.random.default_rng(1)
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, (None, 8, 8, 3), name="images")
        if depthwise:
            weights = tf.constant(rng.normal(0.0, 0.5, (3, 3, 3, 2)).astype(np.float32), name="weights")
            x = tf.nn.depthwise_conv2d(images, weights, [1, 1, 1, 1], "SAME", name="conv")
        else:
            weights = tf.constant(rng.normal(0.0, 0.5, (3, 3, 3, 4)).astype(np.float32), name="weights")
            x = tf.nn.conv2d(images, weights, [1, 2, 2, 1], "SAME", name="conv")
        channels = 6 if depthwise else 4
        if with_bias:
            x = tf.nn.bias_add(x, tf.constant(rng.normal(0.0, 0.5, channels).astype(np.float32)), name="bias")
        bn = tf.compat.v1.nn.fused_batch_norm(x, **batch_norm_parameters(channels, 2), epsilon=epsilon, is_training=False, name="bn")[0]
        tf.nn.relu6(bn, name="out")
    return graph.as_graph_def()


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias_add"])
def test_fused_batch_norm_folds_into_the_conv(depthwise, with_bias):
    original = import_graph_def(conv_bn_graph_def(depthwise, with_bias), "images:0", ["out:0"])
    assert "FusedBatchNormV3" in ops(original)
    result = fold(original)
    graph = result.graph
    assert not ops(graph) & {"FusedBatchNorm", "FusedBatchNormV3"}
    assert result.folded == [{"batch_norm": "bn", "conv": "conv", "ops": (["bias"] if with_bias else []) + ["bn"]}]
    assert result.unfolded == [] and find_batch_norms(graph) == []
    # conv -> BiasAdd named like the BatchNorm, so its reader 'out' is untouched
    (bias_add,) = readers_of(graph, "conv")
    assert (bias_add.op, bias_add.name) == ("BiasAdd", "bn")
    assert graph.node("out").inputs == ["bn"]
    assert graph.constants[tensor_node(graph.node("conv").inputs[1])].shape == ((3, 3, 3, 2) if depthwise else (3, 3, 3, 4))
    assert_close(original, graph, random_input((2, 8, 8, 3)))


AFFINE_VARIANTS = {
    # name: (build the ops after the conv, the ops that end up folded, is there a BN-like scale)
    "mul_add": (lambda x, s, c: tf.add(tf.multiply(x, s, name="mul"), c, name="out"), ["mul", "out"], True),
    "mul_sub": (lambda x, s, c: tf.subtract(tf.multiply(s, x, name="mul"), c, name="out"), ["mul", "out"], True),
    "const_minus_mul": (lambda x, s, c: tf.subtract(c, tf.multiply(x, s, name="mul"), name="out"), ["mul", "out"], True),
    "keras_bias_only": (lambda x, s, c: tf.add(x, tf.reshape(c, (1, 1, 1, -1)), name="out"), ["out"], False),
}


@pytest.mark.parametrize("variant", sorted(AFFINE_VARIANTS))
def test_per_channel_mul_add_sub_after_a_conv_fold(variant):
    build_tail, folded_ops, normalizes = AFFINE_VARIANTS[variant]
    parameters = batch_norm_parameters(4, 6)

    def build(images):
        conv = tf.nn.conv2d(images, small_weights((3, 3, 4, 4)), 1, "SAME", name="conv")
        build_tail(conv, tf.constant(parameters["scale"]), tf.constant(parameters["offset"]))

    original = import_graph_def(single_graph_def(build), "images:0", ["out:0"])
    result = fold(original)
    graph = result.graph
    assert ops(graph) == {"Placeholder", "Const", "Conv2D", "BiasAdd"}
    assert [node.name for node in readers_of(graph, "conv")] == ["out"]
    if normalizes:
        assert result.folded == [{"batch_norm": "out", "conv": "conv", "ops": folded_ops}] and result.bias_adds == []
    else:
        assert result.folded == [] and result.bias_adds == [{"name": "out", "conv": "conv"}]
    assert result.unfolded == []
    assert_close(original, graph, random_input((2, 8, 8, 4)))


# --- float graphs: Keras 3 BatchNormalization -------------------------------------
def keras_frozen_graph_def():
    """Conv2D(no bias) / DepthwiseConv2D / Conv2D(bias), each -> BatchNormalization with random statistics -> ReLU(6)."""
    import keras
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    layers = keras.layers
    images = keras.Input((8, 8, 3), name="images")
    x = layers.Conv2D(8, 3, padding="same", use_bias=False, name="c1")(images)
    x = layers.ReLU(6.0, name="r1")(layers.BatchNormalization(name="bn1")(x))
    x = layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw")(x)
    x = layers.ReLU(6.0, name="r2")(layers.BatchNormalization(name="bn2")(x))
    x = layers.Conv2D(4, 1, use_bias=True, name="c3")(x)
    x = layers.ReLU(6.0, name="r3")(layers.BatchNormalization(name="bn3")(x))
    model = keras.Model(images, x)
    rng = np.random.default_rng(3)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            parameters = batch_norm_parameters(layer.gamma.shape[0], int(rng.integers(1000)))
            layer.set_weights([parameters["scale"], parameters["offset"], parameters["mean"], parameters["variance"]])
        elif layer.weights:
            layer.set_weights([rng.normal(0.0, 0.4, w.shape).astype(np.float32) for w in layer.weights])
    function = tf.function(lambda t: model(t, training=False), input_signature=[tf.TensorSpec((None, 8, 8, 3), tf.float32, name="images")])
    frozen = convert_variables_to_constants_v2(function.get_concrete_function())
    return frozen.graph.as_graph_def(), frozen.inputs[0].name, [t.name for t in frozen.outputs]


@pytest.fixture(scope="module")
def keras_model():
    graph_def, input_tensor, end_points = keras_frozen_graph_def()
    original = import_graph_def(graph_def, input_tensor, end_points)
    return original, fold_constants(original)


def test_keras_batch_norm_freezes_to_mul_add_after_constant_folding(keras_model):
    original, constants_folded = keras_model
    assert {"Rsqrt", "Mul", "AddV2", "Sub"} <= ops(original)
    found = find_batch_norms(constants_folded)
    # Keras suffixes scopes with global counters ('c1_1'), so compare prefixes
    assert [item["op"] for item in found] == ["Mul+AddV2"] * 3
    assert [re.sub(r"_\d+$", "", item["conv"].split("/")[1]) for item in found] == ["c1", "dw", "c3"]
    # x * Const(gamma * rsqrt(var + eps)) + Const(beta - mean * that); x is the conv, or c3's BiasAdd (use_bias=True)
    readers = [[constants_folded.node(tensor_node(t)).op for t in constants_folded.node(item["name"]).inputs] for item in found]
    assert readers == [["Conv2D", "Const"], ["DepthwiseConv2dNative", "Const"], ["BiasAdd", "Const"]]


def test_keras_batch_norm_folds_into_the_conv(keras_model):
    original, constants_folded = keras_model
    result = fold_batch_norms(constants_folded)
    graph = result.graph
    assert ops(graph) == {"Placeholder", "Const", "Conv2D", "DepthwiseConv2dNative", "BiasAdd", "Relu6"}
    assert len(result.folded) == 3 and result.unfolded == [] and find_batch_norms(graph) == []
    for conv in (node for node in graph.nodes if node.op in CONV_OPS):
        (bias_add,) = readers_of(graph, conv.name)
        assert bias_add.op == "BiasAdd" and bias_add.name.endswith("batchnorm/add_1"), bias_add.name
    assert_close(original, graph, random_input((3, 8, 8, 3)))


# --- what cannot be folded ---------------------------------------------------------
def single_graph_def(build, shape=(None, 8, 8, 4)):
    graph = tf.Graph()
    with graph.as_default():
        build(tf.compat.v1.placeholder(tf.float32, shape, name="images"))
    return graph.as_graph_def()


def inference_bn(x, name="bn", data_format="NHWC"):
    channels = x.shape[-1] if data_format == "NHWC" else x.shape[1]
    return tf.compat.v1.nn.fused_batch_norm(
        x, **batch_norm_parameters(channels, 4), is_training=False, data_format=data_format, name=name
    )[0]


def small_weights(shape):
    return tf.constant(np.random.default_rng(5).normal(0.0, 0.5, shape).astype(np.float32))


def test_batch_norm_not_after_a_conv_is_reported():
    graph_def = single_graph_def(lambda images: tf.nn.relu6(inference_bn(images), name="out"))
    original = import_graph_def(graph_def, "images:0", ["out:0"])
    result = fold(original)
    assert result.folded == []
    (item,) = result.unfolded
    assert (item["name"], item["op"], item["conv"]) == ("bn", "FusedBatchNormV3", None)
    assert "not after a Conv2D" in item["reason"] and "Placeholder 'images'" in item["reason"]
    assert max_abs_difference(original, result.graph, random_input((1, 8, 8, 4)))["max_abs_difference"] == 0.0


def test_batch_norm_after_a_shared_conv_is_reported():
    def build(images):
        conv = tf.nn.conv2d(images, small_weights((1, 1, 4, 4)), 1, "SAME", name="conv")
        tf.add(inference_bn(conv), conv, name="out")  # the conv output is read twice: scaling W would break the second read

    original = import_graph_def(single_graph_def(build), "images:0", ["out:0"])
    result = fold(original)
    (item,) = result.unfolded
    assert (item["name"], item["conv"]) == ("bn", "conv") and "also read by ['out']" in item["reason"]
    assert max_abs_difference(original, result.graph, random_input((1, 8, 8, 4)))["max_abs_difference"] == 0.0


def test_training_batch_norm_is_reported():
    def build(images):
        conv = tf.nn.conv2d(images, small_weights((1, 1, 4, 4)), 1, "SAME", name="conv")
        tf.compat.v1.nn.fused_batch_norm(conv, np.ones(4, np.float32), np.zeros(4, np.float32), is_training=True, name="bn")

    original = import_graph_def(single_graph_def(build), "images:0", ["bn:0"])
    result = fold(original)
    (item,) = result.unfolded
    assert (item["name"], item["conv"]) == ("bn", "conv") and "is_training" in item["reason"]
    assert result.graph.node("bn").op == "FusedBatchNormV3"


def test_nchw_batch_norm_is_reported():
    def build(images):
        conv = tf.nn.conv2d(images, small_weights((1, 1, 4, 4)), 1, "SAME", data_format="NCHW", name="conv")
        inference_bn(conv, "bn", "NCHW")

    # shapes only: TensorFlow's CPU kernels cannot run NCHW convs, and nothing here needs to run
    original = import_graph_def(single_graph_def(build, shape=(None, 4, 8, 8)), "images:0", ["bn:0"])
    (item,) = fold(original).unfolded
    assert item["name"] == "bn" and "NCHW" in item["reason"]


# --- constant folding details -------------------------------------------------------
def test_fold_constants_keeps_fake_quant_and_names():
    def build(images):
        base = tf.constant(np.arange(8, dtype=np.float32).reshape(2, 4) / 8.0, name="base")
        first, second = tf.split(base, 2, name="split")  # a folded node read at output 1
        scaled = tf.multiply(tf.math.rsqrt(first + 1.0, name="rsqrt"), 0.5, name="mul_fold")
        quantized = tf.quantization.fake_quant_with_min_max_vars(scaled, tf.constant(-1.0), tf.constant(0.9921875), name="weights_quant")
        tf.add(images * quantized, second, name="out")

    graph_def = single_graph_def(build, shape=(None, 4))
    original = Graph.from_graph_def(graph_def, "images:0", ["out:0"])
    folded = fold_constants(original)
    by_name = folded.by_name()
    fake_quant = by_name["weights_quant"]
    assert fake_quant.op == "FakeQuantWithMinMaxVars"
    assert [by_name[tensor_node(t)].op for t in fake_quant.inputs] == ["Const", "Const", "Const"]
    assert fake_quant.inputs[0] == "mul_fold" and by_name["out"].inputs[1] == "split/output_1" and "split/output_1" in folded.constants
    assert {node.op for node in folded.nodes} == {"Placeholder", "Const", "FakeQuantWithMinMaxVars", "Mul", "AddV2"}
    assert "rsqrt" not in by_name and "base" not in by_name  # dead after folding
    assert max_abs_difference(original, folded, random_input((3, 4)))["max_abs_difference"] == 0.0
    assert "Rsqrt" in {node.op for node in original.nodes}  # the input graph is not modified
