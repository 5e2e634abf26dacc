"""IR layers found in the folded graphs match the structure the TF2IR tool emitted."""

from __future__ import annotations

import collections
import json

import pytest

from conftest import MBV1_GRAPH, MODELS, SSD_GRAPH
from core.frontend.graph import GraphError
from core.frontend.fake_quant import bypass_fake_quant
from core.ir.layers import group_layers

SSD_END_POINTS = [f"BoxPredictor_{k}/Reshape{suffix}:0" for k in range(6) for suffix in ("", "_1")]


def _folded(path, input_tensor, end_points):
    import tensorflow as tf

    from core.frontend.constant_folding import fold_constants

    from core.frontend.folding import fold_batch_norms
    from core.frontend.importer import import_graph

    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(path.read_bytes())
    graph = import_graph(graph_def, input_tensor, end_points, origin=str(path), source={})
    return fold_batch_norms(fold_constants(graph)).graph


@pytest.fixture(scope="module")
def mbv1():
    return _folded(MBV1_GRAPH, "images:0", ["MobilenetV1/Dense/act_quant/FakeQuantWithMinMaxVars:0"])


@pytest.fixture(scope="module")
def ssd():
    return _folded(SSD_GRAPH, "normalized_input_image_tensor:0", SSD_END_POINTS)


def test_mbv1_layers_are_the_reference_irs_layers_in_order(mbv1):
    reference = json.loads((MODELS / "mobilenet_v1_0.5_128_cifar10" / "reference_net_def.json").read_text())
    layers = group_layers(bypass_fake_quant(mbv1)[0]).layers
    assert [layer.ir_name for layer in layers] == [entry["name"] for entry in reference]
    assert [layer.op for layer in layers] == [entry["operation"] for entry in reference]
    assert [layer.activation for layer in layers] == [entry.get("activation_type", "None") for entry in reference]


def test_ssd_has_the_95_layers_of_the_tools_ir(ssd):
    layers = group_layers(bypass_fake_quant(ssd)[0]).layers
    assert collections.Counter(layer.op for layer in layers) == {"conv": 55, "dwconv": 17, "add": 11, "reshape": 12}


@pytest.mark.parametrize("graph_name", ["mbv1", "ssd"])
def test_every_quantized_tensor_of_a_qat_graph_has_its_fake_quant_range(graph_name, request):
    float_graph, ranges = bypass_fake_quant(request.getfixturevalue(graph_name))
    assert not any(node.op.startswith("FakeQuant") for node in float_graph.nodes)
    layer_graph = group_layers(float_graph)
    tensors = layer_graph.quantized_tensors()
    assert [t for t in tensors if t not in ranges] == [float_graph.input_tensor]  # QAT leaves the input to the IR
    for layer in layer_graph.layers:
        if layer.weight:
            assert f"{layer.weight}:0" in ranges and f"{layer.bias}:0" in ranges


def test_reshape_shares_the_scale_of_what_it_reshapes(ssd):
    layer_graph = group_layers(bypass_fake_quant(ssd)[0])
    reshape = next(layer for layer in layer_graph.layers if layer.op == "reshape")
    assert reshape.output not in layer_graph.quantized_tensors()
    assert layer_graph.scale_source(reshape.output) == reshape.inputs[0]


def test_a_node_outside_every_layer_is_named():
    import tensorflow as tf

    from core.frontend.graph import Graph

    with tf.Graph().as_default() as tf_graph:
        images = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 3], name="images")
        pooled = tf.nn.avg_pool2d(images, 2, 2, "VALID", name="pool")
        tf.nn.local_response_normalization(pooled, name="squash")
    graph = Graph.from_graph_def(tf_graph.as_graph_def(), "images:0", ["squash:0"])
    graph.infer_shapes()
    with pytest.raises(GraphError, match="squash .LRN. is not part of any IR layer"):
        group_layers(graph)


def test_each_pattern_declares_what_its_output_quantization_follows():
    """The rule a scheme's kernels read (Layer.output_rule), by the function the layer computes, not the op that names
    it: a swish region named by its Sigmoid is calibrated as its own, a sigmoid alone is LOGISTIC's."""
    import tensorflow as tf

    from core.frontend.graph import Graph
    from core.frontend.layers import OutputRule

    with tf.Graph().as_default() as tf_graph:
        x = tf.compat.v1.placeholder(tf.float32, [1, 8, 8, 4], name="x")
        gate = tf.sigmoid(x, name="gate")
        y = tf.reshape(x, [1, 8, 8, 4], name="y")
        swish = tf.multiply(tf.sigmoid(y, name="swish_sigmoid"), y, name="swish")  # a region named by its Sigmoid
        inverse_root = tf.math.rsqrt(tf.reshape(x, [1, 8, 8, 4]), name="inverse_root")  # a .tflite's RSQRT read back
        pooled = tf.nn.max_pool2d(swish * gate, 2, 2, "VALID", name="max") + tf.nn.avg_pool2d(tf.tanh(x), 2, 2, "VALID", name="avg")
        mean = tf.reduce_mean(pooled, axis=[1, 2], keepdims=True, name="mean")
        roots = tf.reduce_mean(inverse_root, axis=[1, 2], keepdims=True)
        out = tf.nn.softmax(tf.reshape(mean + roots, [1, 4]), name="softmax")
    graph = Graph.from_graph_def(tf_graph.as_graph_def(), "x:0", [out.name])
    graph.infer_shapes()
    layers = group_layers(graph).layers
    rules = {layer.name: layer.output_rule for layer in layers}
    named = {layer.name: layer.attrs.named.name for layer in layers if layer.op == "lut" and layer.attrs.named is not None}
    assert named == {"gate": "sigmoid", "Tanh": "tanh", "swish_sigmoid": "silu", "inverse_root": "rsqrt"}, named
    assert rules["gate"] is OutputRule.UNIT_RANGE and rules["Tanh"] is OutputRule.SIGNED_UNIT_RANGE, rules
    assert rules["max"] is OutputRule.KEEPS_INPUT_MAXIMA and rules["avg"] is OutputRule.KEEPS_INPUT, rules
    assert rules["mean"] is OutputRule.OWN and rules["softmax"] is OutputRule.UNIT_RANGE, rules
    assert rules["swish_sigmoid"] is OutputRule.OWN, rules
