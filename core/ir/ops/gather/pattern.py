"""gather in the graph: a GatherV2 of a constant table's rows by the network's integer ids (core/frontend/embedding.py
made an Embedding one)."""

from __future__ import annotations

from core.frontend.embedding import is_ids_input
from core.frontend.graph import Graph, Node, canonical_tensor
from core.frontend.layers import GraphIndex, Layer, Pattern


def reads_ids(graph: Graph, node: Node, index: GraphIndex) -> bool:
    """A gather of rows of a constant table (axis 0) by the network's integer input."""
    return (index.is_const(node.inputs[0]) and index.is_const(node.inputs[2]) and int(index.const(node.inputs[2])) == 0
            and canonical_tensor(node.inputs[1]) in graph.input_tensors and is_ids_input(index.producer(node.inputs[1])))


def match_gather(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    """weight: the table's Const (looked up, never multiplied: the rule quantizes it with the output)."""
    return Layer(name=node.name, op="gather", inputs=[canonical_tensor(node.inputs[1])], output=f"{node.name}:0", nodes=[node.name],
                 weight=index.producer(node.inputs[0]).name)


PATTERN = Pattern("gather", ("GatherV2",), match_gather, reads_ids)
