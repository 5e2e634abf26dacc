"""concat2 and concat in the graph: a ConcatV2 of two tensors (concat2), or of more (concat),
along H, W or C (the last axis of flattened [N, C] tensors is C; tokens [N, L, C] are the image [N, 1, L, C])."""

from __future__ import annotations

from dataclasses import dataclass

from core.frontend.graph import Graph, GraphError, Node
from core.frontend.layers import GraphIndex, Layer, Pattern

AXIS_NAMES = {1: "H", 2: "W", 3: "C", -1: "C", -2: "W", -3: "H"}


@dataclass
class ConcatAttrs:
    dim: str  # "H", "W" or "C"


def match_concat(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    *values, axis_tensor = node.inputs
    if not index.is_const(axis_tensor):
        raise GraphError(f"{node.name}: ConcatV2 along an axis computed at run time; the IR concatenates along H, W or C")
    axis = int(index.const(axis_tensor))
    rank = len(graph.shape(values[0]) or [])
    if rank == 2 and axis in (1, -1):
        axis = 3  # [N, C] is the [N, 1, 1, C] image
    elif rank == 3 and axis in (1, 2, -1, -2):
        axis = axis % 3 + 1  # tokens [N, L, C] are the [N, 1, L, C] image: along L is along W
    elif rank != 4 or axis not in AXIS_NAMES:
        raise GraphError(f"{node.name}: concat along axis {axis} of rank-{rank} tensors; the IR concatenates NHWC tensors "
                         f"along H, W or C")
    return Layer(name=node.name, op="concat2" if len(values) == 2 else "concat", inputs=values, output=f"{node.name}:0",
                 nodes=[node.name], attrs=ConcatAttrs(AXIS_NAMES[axis]))


def _inputs(node: Node) -> int:
    return len(node.inputs) - 1


PATTERN = Pattern("concat2", ("ConcatV2",), match_concat, applies=lambda graph, node, index: _inputs(node) == 2)
PATTERN_N = Pattern("concat", ("ConcatV2",), match_concat, applies=lambda graph, node, index: _inputs(node) > 2)
