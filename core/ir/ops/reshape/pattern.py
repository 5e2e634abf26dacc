"""reshape in the graph: Reshape, Squeeze and ExpandDims (the same bytes in another shape)."""

from __future__ import annotations

from core.frontend.graph import Graph, Node
from core.frontend.layers import GraphIndex, Layer, Pattern


def match_reshape(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    return Layer(name=node.name, op="reshape", inputs=[node.inputs[0]], output=f"{node.name}:0", nodes=[node.name])


PATTERN = Pattern("reshape", ("Reshape", "Squeeze", "ExpandDims"), match_reshape)
