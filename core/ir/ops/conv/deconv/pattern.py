"""deconv in the graph: Keras' Conv2DTranspose, a Conv2DBackpropInput of the layer's input by a constant filter
(TensorFlow's [height, width, output channels, input channels]), its output size computed at run time from the
input's batch (Shape -> StridedSlice -> Pack, which belong to the layer), with its bias and activation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.frontend.graph import Graph, GraphError, Node, canonical_tensor
from core.frontend.layers import GraphIndex, Layer, Pattern
from core.ir.activations import absorb_activation
from core.ir.ops.conv.pattern import absorb_bias

TRANSPOSE_OP = "Conv2DBackpropInput"
SIZE_OPS = ("Shape", "StridedSlice", "Pack")  # the output size: [batch of the input, height, width, channels]


@dataclass
class DeconvAttrs:
    kernel: list[int]  # [height, width]
    strides: list[int]
    padding: str  # TensorFlow's: SAME or VALID
    dense: bool = False  # conv's constants (conv_params) ask: never a dense layer
    block_diagonal: bool = False  # nor a depthwise weight held as a conv's


def _transpose_reading(node: Node, index: GraphIndex) -> Node | None:
    """The Conv2DBackpropInput whose output size `node` (one of SIZE_OPS) computes, through the others; else None."""
    current = node
    for _ in SIZE_OPS:
        reader = index.sole_reader(f"{current.name}:0")
        if reader is None:
            return None
        if reader.op == TRANSPOSE_OP:
            return reader if canonical_tensor(reader.inputs[0]) == f"{current.name}:0" else None
        if reader.op not in SIZE_OPS:
            return None
        current = reader
    return None


def feeds_transpose(graph: Graph, node: Node, index: GraphIndex) -> bool:
    return node.op == TRANSPOSE_OP or _transpose_reading(node, index) is not None


def _size_nodes(transpose: Node, index: GraphIndex) -> list[str]:
    """The SIZE_OPS nodes computing the transpose's output size (empty when it is a constant)."""
    names, tensor = [], transpose.inputs[0]
    while not index.is_const(tensor) and (producer := index.producer(tensor)) is not None and producer.op in SIZE_OPS:
        names.append(producer.name)
        tensor = producer.inputs[0]
    return names[::-1]


def match_deconv(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    transpose = node if node.op == TRANSPOSE_OP else _transpose_reading(node, index)
    data, weight = transpose.inputs[2], transpose.inputs[1]
    if not index.is_const(weight):
        raise GraphError(f"{transpose.name}: the filter of a transposed convolution (Conv2DTranspose) is not a constant")
    if transpose.attr("data_format", "NHWC") != "NHWC" or transpose.attr("padding") not in ("SAME", "VALID"):
        raise GraphError(f"{transpose.name}: Conv2DTranspose with data_format {transpose.attr('data_format', 'NHWC')} and padding "
                         f"{transpose.attr('padding')}; the IR takes NHWC with SAME or VALID padding")
    dilations = [int(v) for v in transpose.attr("dilations", [1, 1, 1, 1])]
    if dilations != [1, 1, 1, 1]:
        raise GraphError(f"{transpose.name}: Conv2DTranspose with dilation_rate {dilations[1:3]}; the IR's deconv has none")
    filter_shape = np.asarray(index.const(weight)).shape
    layer = Layer(name=transpose.name, op="deconv", inputs=[data], output=f"{transpose.name}:0",
                  nodes=[*_size_nodes(transpose, index), transpose.name], weight=index.producer(weight).name,
                  attrs=DeconvAttrs([int(filter_shape[0]), int(filter_shape[1])], [int(v) for v in transpose.attr("strides")[1:3]],
                                    transpose.attr("padding")))
    absorb_bias(layer, index, int(filter_shape[2]))
    absorb_activation(layer, index)
    return layer


PATTERN = Pattern("deconv", (TRANSPOSE_OP, *SIZE_OPS), match_deconv, applies=feeds_transpose)
