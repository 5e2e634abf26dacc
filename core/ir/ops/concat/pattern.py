"""concat2 in the graph: a ConcatV2 of two tensors along H, W or C."""

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
    if len(values) != 2:
        raise GraphError(f"{node.name}: ConcatV2 of {len(values)} inputs; the IR's concat2 takes exactly two")
    axis = int(index.const(axis_tensor))
    if axis not in AXIS_NAMES:
        raise GraphError(f"{node.name}: concat along axis {axis}; the IR concatenates along H, W or C only")
    return Layer(name=node.name, op="concat2", inputs=values, output=f"{node.name}:0", nodes=[node.name],
                 attrs=ConcatAttrs(AXIS_NAMES[axis]))


PATTERN = Pattern("concat2", ("ConcatV2",), match_concat)
