"""softmax in the graph: Softmax (over the last axis, as TensorFlow's op is)."""

from __future__ import annotations

from core.frontend.graph import Graph, Node
from core.frontend.layers import GraphIndex, Layer, OutputRule, Pattern


def match_softmax(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    return Layer(name=node.name, op="softmax", inputs=[node.inputs[0]], output=f"{node.name}:0", nodes=[node.name],
                 output_rule=OutputRule.UNIT_RANGE)


PATTERN = Pattern("softmax", ("Softmax",), match_softmax)
