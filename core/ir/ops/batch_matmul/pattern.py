"""batch_matmul in the graph: a BatchMatMulV2 (or BatchMatMul) of two activations, a multi-head attention's products
(core/frontend/attention.py writes its einsums so). A product by a constant is a Dense's, the conv patterns' (a MatMul)."""

from __future__ import annotations

from core.frontend.graph import Graph, Node
from core.frontend.layers import GraphIndex, Layer, Pattern


def is_activation_product(graph: Graph, node: Node, index: GraphIndex) -> bool:
    return len(node.inputs) == 2 and not any(index.is_const(tensor) for tensor in node.inputs)


def match_batch_matmul(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    """attrs: (adj_x, adj_y)."""
    return Layer(name=node.name, op="batch_matmul", inputs=list(node.inputs), output=f"{node.name}:0", nodes=[node.name],
                 attrs=(bool(node.attr("adj_x", False)), bool(node.attr("adj_y", False))))


PATTERN = Pattern("batch_matmul", ("BatchMatMulV2", "BatchMatMul", "BatchMatMulV3"), match_batch_matmul, applies=is_activation_product)
