"""A constant operand of an activation op, as the graph holds it: a ViT's class token concatenated before its patches, its
position embedding added to every token (what TFLite's converter and onnx2tf write as a constant input of CONCATENATION
and ADD). A file's constant has a batch of one; the graph runs on batches, so the constant is broadcast to the batch of
the op's other operand, `like`:

    BroadcastTo(constant, ConcatV2([StridedSlice(Shape(like), [0], [1], [1]), constant's shape[1:]], 0))

The IR's constant operation takes those four nodes as one layer (core/ir/ops/constant), its output an activation on a
grid of its own, read by the op as any other. `broadcast` writes the form in TensorFlow (the .tflite importer),
`form_nodes` as a graph's nodes (the rewrites below, of a Keras model's or a SavedModel's constants), `find` reads it
back. A constant of one value per channel (a bias) or one in all (a lookup table's) is no such operand: it stays a Const."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.frontend.graph import Graph, Node, canonical_tensor, tensor_node
from core.frontend.rewrite import const_node, copy_node

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


def form_nodes(name: str, constant: str, values: np.ndarray, like: str, dtype: dict, output: str | None = None) -> tuple[list[Node], dict[str, np.ndarray]]:
    """FORM's nodes (and their constants) broadcasting the Const `constant` (of `values`) to the batch of `like`, the last
    one named `output` (default `name`/BroadcastTo): `broadcast`'s, for a graph (a Keras model's, a SavedModel's)."""
    int32 = {"type": "int32"}
    constants = {f"{name}/batch/begin": np.zeros(1, np.int32), f"{name}/batch/end": np.ones(1, np.int32),
                 f"{name}/batch/strides": np.ones(1, np.int32), f"{name}/shape/values": np.asarray(values.shape[1:], np.int32),
                 f"{name}/shape/axis": np.asarray(0, np.int32)}
    masks = {key: {"i": 0} for key in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    nodes = [*(const_node(key, value) for key, value in constants.items()),
             Node(f"{name}/Shape", "Shape", [like], {"T": dict(dtype), "out_type": dict(int32)}),
             Node(f"{name}/batch", "StridedSlice", [f"{name}/Shape", f"{name}/batch/begin", f"{name}/batch/end", f"{name}/batch/strides"],
                  {"T": dict(int32), "Index": dict(int32), **masks}),
             Node(f"{name}/shape", "ConcatV2", [f"{name}/batch", f"{name}/shape/values", f"{name}/shape/axis"],
                  {"T": dict(int32), "N": {"i": 2}, "Tidx": dict(int32)}),
             Node(output or f"{name}/BroadcastTo", "BroadcastTo", [constant, f"{name}/shape"], {"T": dict(dtype), "Tidx": dict(int32)})]
    return nodes, constants


SUMS = ("Add", "AddV2")


def constant_operands(graph: Graph, by_name: dict[str, Node]):
    """A constant operand of an Add holding a value for every element of the other's image, or of a concatenation,
    broadcast to the batch of a computed operand (FORM), as the .tflite importer writes it."""
    replacements: dict[str, list[Node]] = {}
    constants: dict[str, np.ndarray] = {}
    notes: list[str] = []
    for node in graph.nodes:
        concatenated = node.op == "ConcatV2"
        if not (concatenated or node.op in SUMS) or node.attr("T") != "float32":
            continue  # a shape's concatenation (FORM's own) is no activation's
        operands = node.inputs[:-1] if concatenated else node.inputs
        computed = [tensor for tensor in operands if tensor_node(tensor) not in graph.constants]
        if not computed or (not concatenated and len(operands) != 2):
            continue
        like, rewired, added = canonical_tensor(computed[0]), list(node.inputs), []
        shape = graph.shape(like)
        for position, tensor in enumerate(operands):
            found = graph.constants.get(tensor_node(tensor))
            if found is None or shape is None:
                continue
            values = np.asarray(found)
            values = values.reshape(1, *values.shape) if values.ndim == len(shape) - 1 else values  # Keras' constant without a batch
            if not (concatenated or of_every_element(values, tuple(shape))):
                continue
            name = f"{node.name}/operand_{position}"
            nodes, values_of = form_nodes(name, tensor_node(tensor), values, like, node.attrs["T"])
            added.append(position)
            constants.update(values_of)
            replacements.setdefault(node.name, []).extend(nodes)
            rewired[position] = f"{name}/BroadcastTo:0"
        if added:
            replacements[node.name].append(copy_node(node, inputs=rewired))
            notes.append(f"{node.name}: constant operand(s) {added} broadcast to the batch of {like}")
    return replacements, constants, notes


def _batch_of(graph: Graph, by_name: dict[str, Node], multiples: str) -> str | None:
    """The tensor whose batch a Tile's `multiples` repeat by, when they are Pack(StridedSlice(Shape(it))[0], 1, ..., 1)
    (Keras' `ops.tile(token, [ops.shape(x)[0], 1, 1])`); None otherwise."""
    pack = by_name.get(tensor_node(multiples))
    if pack is None or pack.op != "Pack" or not pack.inputs:
        return None
    ones = [graph.constants.get(tensor_node(tensor)) for tensor in pack.inputs[1:]]
    if any(one is None or np.asarray(one).size != 1 or int(np.asarray(one).reshape(-1)[0]) != 1 for one in ones):
        return None
    batch = by_name.get(tensor_node(pack.inputs[0]))
    shape = by_name.get(tensor_node(batch.inputs[0])) if batch is not None and batch.op == "StridedSlice" else None
    begin = graph.constants.get(tensor_node(batch.inputs[1])) if batch is not None and batch.op == "StridedSlice" else None
    if shape is None or shape.op != "Shape" or begin is None or int(np.asarray(begin).reshape(-1)[0]) != 0:
        return None
    return canonical_tensor(shape.inputs[0])


def tiled_constants(graph: Graph, by_name: dict[str, Node]):
    """A constant of a batch of one tiled to the batch of a tensor (Keras' class token) as FORM, as the .tflite importer
    writes it."""
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        values = graph.constants.get(tensor_node(node.inputs[0])) if node.op == "Tile" else None
        like = _batch_of(graph, by_name, node.inputs[1]) if values is not None and np.asarray(values).shape[:1] == (1,) else None
        if like is None:
            continue
        nodes, values_of = form_nodes(node.name, tensor_node(node.inputs[0]), np.asarray(values), like, node.attrs["T"], output=node.name)
        replacements[node.name] = nodes
        constants.update(values_of)
        notes.append(f"{node.name}: a constant tiled to the batch of {like} -> broadcast to it")
    return replacements, constants, notes
