"""A softmax's beta in a graph: Softmax(Mul(logits, beta)), beta a positive finite scalar constant (TFLite's
SoftmaxOptions.beta as the .tflite importer writes it; a temperature's inverse in a Keras model). The IR's softmax
layer takes the Mul as its own attribute (core/ir/ops/softmax/pattern.py), as TFLite's kernel scales its exp table and
not its input: the passes that would fold a scalar map into what precedes it (a conv's weights, a lookup table) leave
this one alone, or an int8 tensor would hold beta x the logits (1e30 x them, for an arg-max softmax)."""

from __future__ import annotations

import math

import numpy as np

from core.frontend.graph import Graph, Node, tensor_node
from core.frontend.layers import GraphIndex


def softmax_beta(graph: Graph, node: Node, reader: Node | None) -> tuple[str, float] | None:
    """(the logits, beta) when `node` is a Mul of a tensor by a positive finite scalar constant and `reader`, its only
    reader, a Softmax; None otherwise."""
    if reader is None or reader.op != "Softmax" or node.op != "Mul" or len(node.inputs) != 2:
        return None
    constant = [position for position, tensor in enumerate(node.inputs) if tensor_node(tensor) in graph.constants]
    if len(constant) != 1:
        return None
    values = np.asarray(graph.constants[tensor_node(node.inputs[constant[0]])])
    beta = float(np.float32(values.reshape(-1)[0])) if values.size == 1 else math.nan
    return (node.inputs[1 - constant[0]], beta) if 0.0 < beta < math.inf else None


def scales_softmax(graph: Graph, node: Node, index: GraphIndex) -> bool:
    """Whether `node` is a softmax's beta (the pattern's `applies`, and what a lookup table leaves alone)."""
    return softmax_beta(graph, node, index.sole_reader(f"{node.name}:0")) is not None
