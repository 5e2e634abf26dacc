"""A folded float graph grouped into IR layers by the patterns of the IR's operations."""

from __future__ import annotations

from core.frontend.graph import Graph
from core.frontend.layers import LayerGraph, group_layers as group_by_patterns
from core.ir.activations import ACTIVATIONS
from core.ir.ops import OPS


def group_layers(graph: Graph) -> LayerGraph:
    """Every computing node of `graph` in exactly one IR layer, or a GraphError naming the node."""
    patterns = [pattern for op in OPS.values() for pattern in op.patterns]
    fusable = sorted(op for activation in ACTIVATIONS.values() for op in activation.tf_ops)
    what = f", with BiasAdd and the activations {', '.join(fusable)} fused into the conv or add before them"
    return group_by_patterns(graph, patterns, {name: op.annotate for name, op in OPS.items()}, what)
