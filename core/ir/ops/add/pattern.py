"""add in the graph: an Add/AddV2 of two activations (a bias Add, with one constant operand,
belongs to its conv), with the activation after it fused."""

from __future__ import annotations

from core.frontend.graph import Graph, GraphError, Node
from core.frontend.layers import GraphIndex, Layer, Pattern
from core.ir.activations import absorb_activation


def is_activation_sum(graph: Graph, node: Node, index: GraphIndex) -> bool:
    return len(node.inputs) == 2 and not any(index.is_const(tensor) for tensor in node.inputs)


def match_add(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    shapes = [graph.shape(tensor) for tensor in node.inputs]
    if all(shape is not None for shape in shapes) and shapes[0][1:] != shapes[1][1:]:
        # the spec's add is element for element; a broadcast operand has no IR form yet
        raise GraphError(f"an add of a {shapes[0][1:]} and a {shapes[1][1:]} tensor: the IR's add takes two tensors of one "
                         "shape (broadcasting is not supported; a per-channel product is, as mul)")
    layer = Layer(name=node.name, op="add", inputs=list(node.inputs), output=f"{node.name}:0", nodes=[node.name])
    absorb_activation(layer, index)
    return layer


PATTERN = Pattern("add", ("Add", "AddV2"), match_add, applies=is_activation_sum)
