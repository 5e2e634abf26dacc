"""The pools in the graph: AvgPool / MaxPool, and Mean over H and W (a global average pool, as
Keras writes GlobalAveragePooling2D)."""

from __future__ import annotations

from dataclasses import dataclass

from core.frontend.graph import Graph, GraphError, Node
from core.frontend.layers import GraphIndex, Layer, OutputRule, Pattern


@dataclass
class PoolAttrs:
    kernel: list[int]  # [height, width]
    strides: list[int]
    padding: str  # TensorFlow's: SAME, VALID or EXPLICIT
    explicit_padding: list[int] | None = None  # [top, bottom, left, right]
    spatial_mean: bool = False  # a Mean over height and width (Keras' global average), not a pooling window


def match_pool(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    if node.attr("data_format", "NHWC") != "NHWC":
        raise GraphError(f"{node.name}: {node.op} in {node.attr('data_format')} layout; the IR is NHWC only")
    ksize, strides = node.attr("ksize"), node.attr("strides")
    if ksize[0] != 1 or ksize[3] != 1 or strides[0] != 1 or strides[3] != 1:
        raise GraphError(f"{node.name}: {node.op} with ksize {ksize}, strides {strides}; the IR pools over H and W only")
    attrs = PoolAttrs(kernel=[ksize[1], ksize[2]], strides=[strides[1], strides[2]], padding=node.attr("padding"))
    if attrs.padding == "EXPLICIT":  # MaxPool: [[0, 0], [top, bottom], [left, right], [0, 0]] flattened
        attrs.explicit_padding = [int(v) for v in node.attr("explicit_paddings")[2:6]]
    average = node.op == "AvgPool"
    return Layer(name=node.name, op="avg_pool" if average else "max_pool", inputs=[node.inputs[0]],
                 output=f"{node.name}:0", nodes=[node.name], attrs=attrs,
                 output_rule=OutputRule.KEEPS_INPUT if average else OutputRule.KEEPS_INPUT_MAXIMA)


def is_spatial_mean(graph: Graph, node: Node, index: GraphIndex) -> bool:
    return index.is_const(node.inputs[1]) and sorted(index.const(node.inputs[1]).reshape(-1).tolist()) == [1, 2]


def match_mean(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    """The global average: an avg_pool layer (kernel = the whole input, stride 1, VALID)."""
    shape = graph.shape(node.inputs[0])
    if shape is None or shape[1] < 0 or shape[2] < 0:
        raise GraphError(f"{node.name}: global average over an input of unknown size {shape}")
    if not node.attr("keep_dims", False):
        raise GraphError(f"{node.name}: Mean without keep_dims; the IR's avg_pool keeps H and W (use keepdims=True)")
    return Layer(name=node.name, op="avg_pool", inputs=[node.inputs[0]], output=f"{node.name}:0", nodes=[node.name],
                 attrs=PoolAttrs(kernel=[shape[1], shape[2]], strides=[1, 1], padding="VALID", spatial_mean=True))


AVG_POOL = Pattern("avg_pool", ("AvgPool",), match_pool)
GLOBAL_MEAN = Pattern("avg_pool", ("Mean",), match_mean, applies=is_spatial_mean)
MAX_POOL = Pattern("max_pool", ("MaxPool",), match_pool)
