"""A constant operand of an activation op, as the graph holds it: a ViT's class token concatenated before its patches, its
position embedding added to every token (what TFLite's converter and onnx2tf write as a constant input of CONCATENATION
and ADD). A file's constant has a batch of one; the graph runs on batches, so the constant is broadcast to the batch of
the op's other operand, `like`:

    BroadcastTo(constant, ConcatV2([StridedSlice(Shape(like), [0], [1], [1]), constant's shape[1:]], 0))

The IR's constant operation takes those four nodes as one layer (core/ir/ops/constant), its output an activation on a
grid of its own, read by the op as any other. `broadcast` writes the form, `find` reads it back: one definition of it.
A constant of one value per channel (a bias) or one in all (a lookup table's) is no such operand: it stays a Const."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.frontend.graph import Graph, Node, canonical_tensor, tensor_node

FORM = ("Shape", "StridedSlice", "ConcatV2", "BroadcastTo")  # in the graph's order


def of_every_element(values: np.ndarray, like: tuple[int, ...]) -> bool:
    """Whether a constant operand of an element-wise op is one of the form: a value for every element of an image of the
    other operand, `like` (a position embedding), beyond its channels. One that broadcasts (a per-channel vector, in the
    channel-last or a channel-first view, is a bias or a scale folded into a conv; a scalar, a lookup table's) is not. A
    concatenation's constant operand always is."""
    return tuple(values.shape[1:]) == tuple(like[1:]) and values.ndim >= 3 and int(np.prod(values.shape[1:-1])) > 1


def broadcast(tf: Any, constant: Any, like: Any, name: str) -> Any:
    """The constant (a TensorFlow constant of batch 1) broadcast to the batch of `like`, as FORM."""
    batch = tf.strided_slice(tf.shape(like, name=f"{name}/Shape"), [0], [1], [1], name=f"{name}/batch")
    shape = tf.concat([batch, np.asarray(constant.shape[1:], np.int32)], 0, name=f"{name}/shape")
    return tf.broadcast_to(constant, shape, name=f"{name}/BroadcastTo")


@dataclass(frozen=True)
class BatchedConstant:
    like: str  # the tensor whose batch it takes
    constant: str  # the Const node of its values (batch 1)
    output: str  # the BroadcastTo's tensor
    nodes: tuple[str, ...]  # FORM's nodes


def find(graph: Graph, shape: Node, readers: dict[str, list[Node]]) -> BatchedConstant | None:
    """The form starting at the Shape node `shape`, each node its predecessor's only reader; None otherwise."""
    chain, node = [shape], shape
    for op in FORM[1:]:
        reading = readers.get(f"{node.name}:0", [])
        if len(reading) != 1 or reading[0].op != op:
            return None
        node = reading[0]
        chain.append(node)
    if shape.op != FORM[0] or tensor_node(node.inputs[0]) not in graph.constants:
        return None
    return BatchedConstant(canonical_tensor(shape.inputs[0]), tensor_node(node.inputs[0]), f"{node.name}:0",
                           tuple(n.name for n in chain))
