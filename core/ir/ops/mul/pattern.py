"""mul in the graph: a Mul of two activations (squeeze-excitation's x * gate, the gate [N, 1, 1, C]
broadcast over H and W), with the activation after it fused. A Mul by a scalar constant is part
of a lookup table (lut); by a per-channel constant after a conv, folded into it (fold_check)."""

from __future__ import annotations

from core.frontend.graph import Graph, Node, canonical_tensor
from core.frontend.layers import GraphIndex, Layer, Pattern
from core.ir.activations import absorb_activation


def is_activation_product(graph: Graph, node: Node, index: GraphIndex) -> bool:
    return (len(node.inputs) == 2 and not any(index.is_const(tensor) for tensor in node.inputs)
            and canonical_tensor(node.inputs[0]) != canonical_tensor(node.inputs[1]))


def match_mul(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    layer = Layer(name=node.name, op="mul", inputs=list(node.inputs), output=f"{node.name}:0", nodes=[node.name])
    absorb_activation(layer, index)
    return layer


PATTERN = Pattern("mul", ("Mul",), match_mul, applies=is_activation_product)
