"""softmax in the graph: Softmax (over the last axis, as TensorFlow's op is), its logits possibly scaled first by a
positive scalar, beta (core/frontend/softmax_beta.py: a Mul the graph's order puts before the Softmax, where the layer
starts). Beta is the layer's attribute, not a layer of its own, as in TFLite's SOFTMAX."""

from __future__ import annotations

from dataclasses import dataclass

from core.frontend.graph import Graph, GraphError, Node
from core.frontend.layers import GraphIndex, Layer, OutputRule, Pattern
from core.frontend.softmax_beta import scales_softmax, softmax_beta


@dataclass(frozen=True)
class SoftmaxAttrs:
    beta: float = 1.0  # the logits' multiplier


def _softmax_layer(softmax: Node, logits: str, nodes: list[str], beta: float) -> Layer:
    return Layer(name=softmax.name, op="softmax", inputs=[logits], output=f"{softmax.name}:0", nodes=nodes,
                 attrs=SoftmaxAttrs(beta), output_rule=OutputRule.UNIT_RANGE)


def match_softmax(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    return _softmax_layer(node, node.inputs[0], [node.name], 1.0)


def match_scaled_softmax(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    softmax = index.sole_reader(f"{node.name}:0")
    found = softmax_beta(graph, node, softmax)
    if softmax is None or found is None:
        raise GraphError(f"{node.name}: not a softmax's logits scaled by a positive scalar")
    logits, beta = found
    return _softmax_layer(softmax, logits, [node.name, softmax.name], beta)


PATTERN = Pattern("softmax", ("Softmax",), match_softmax)
SCALED = Pattern("softmax", ("Mul",), match_scaled_softmax, applies=scales_softmax, leads=True)
