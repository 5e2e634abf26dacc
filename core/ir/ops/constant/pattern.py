"""constant in the graph: core/frontend/batched_constant.py's form, from its Shape (the first of its nodes in the graph's
order, where the layer starts)."""

from __future__ import annotations

from core.frontend.batched_constant import find
from core.frontend.graph import Graph, GraphError, Node
from core.frontend.layers import GraphIndex, Layer, Pattern


def starts_constant(graph: Graph, node: Node, index: GraphIndex) -> bool:
    return find(graph, node, index.readers) is not None


def match_constant(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    """weight: the values' Const (copied, never multiplied: the rule quantizes it with the output)."""
    found = find(graph, node, index.readers)
    if found is None:
        raise GraphError(f"{node.name}: not a constant broadcast to a batch (core/frontend/batched_constant.py)")
    return Layer(name=found.output.split(":")[0], op="constant", inputs=[found.like], output=found.output, nodes=list(found.nodes),
                 weight=found.constant)


PATTERN = Pattern("constant", ("Shape",), match_constant, applies=starts_constant, leads=True)
