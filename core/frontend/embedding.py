"""A text model's Embedding on integer token ids, rewritten before the signals are lifted (core/frontend/canonicalize.py:
EARLY_REWRITES).

Keras' Embedding is a GatherV2 of its constant table [V, D] by the ids [N, L], the ids first wrapped (an id below 0
reads from the end: SelectV2(ids < 0, ids + V, ids)). The ids are checked against the vocabulary where they enter
(core/quantize/grid.py: IndexGrid: an id outside [0, V) is refused naming it, as TFLite's GATHER refuses it at run
time), so the wrap never changes one and is dropped. The ids' placeholder becomes the image [N, 1, L] and the table is
gathered by it, giving the image [N, 1, L, D] the Embedding's sequence is held as (core/frontend/signals.py); a Squeeze
gives the sequence [N, L, D] back under the Embedding's own name, which the signal lifting then removes.

The ids are never quantized: the IR's gather reads them as they are (int32) and looks up rows of the table quantized
on its output's grid, which is what quantizing each looked-up value on that grid gives."""

from __future__ import annotations

import numpy as np

from core.frontend.graph import Graph, GraphError, Node, canonical_tensor, named_samples, tensor_node
from core.frontend.rewrite import constant_of, copy_node

INTEGER_TYPES = frozenset({"int32", "int64"})


def is_ids_input(node: Node | None) -> bool:
    """`node` is a placeholder of integer token ids."""
    return node is not None and node.op == "Placeholder" and node.attr("dtype") in INTEGER_TYPES


def _unwrapped(by_name: dict[str, Node], tensor: str) -> str:
    """The ids tensor a Keras 3 Embedding's wrap of negative ids reads (SelectV2(Less(ids, 0), AddV2(ids, V), ids)), else
    `tensor` itself."""
    select = by_name.get(tensor_node(tensor))
    if select is None or select.op not in ("SelectV2", "Select") or len(select.inputs) != 3:
        return tensor
    less, _, ids = (by_name.get(tensor_node(name)) for name in select.inputs)
    if less is None or less.op != "Less" or ids is None or canonical_tensor(less.inputs[0]) != canonical_tensor(select.inputs[2]):
        return tensor
    return select.inputs[2]


def _held_as_image(by_name: dict[str, Node], tensor: str) -> Node | None:
    """The Reshape giving `tensor` where it holds ids [N, L] as [N, 1, L] already (a .tflite's RESHAPE of its input, as the
    .tflite writer writes a text model), else None."""
    reshape = by_name.get(tensor_node(tensor))
    if reshape is None or reshape.op != "Reshape" or not reshape.output_shapes:
        return None
    source = by_name.get(tensor_node(reshape.inputs[0]))
    before, after = (source.output_shapes[0] if source is not None and source.output_shapes else None), reshape.output_shapes[0]
    if before is None or after is None or len(before) != 2 or list(after[1:]) != [1, before[1]]:
        return None
    return reshape


def _ids_of(by_name: dict[str, Node], tensor: str) -> tuple[str, Node | None]:
    """(the ids tensor a gather's indices `tensor` are, through Keras' wrap and a RESHAPE to [N, 1, L]; that Reshape, or
    None where the ids are not held as [N, 1, L] already)."""
    indices = _unwrapped(by_name, tensor)
    held = _held_as_image(by_name, indices)
    return (held.inputs[0] if held is not None else indices), held


def _lookup(graph: Graph, by_name: dict[str, Node], node: Node) -> tuple[Node, np.ndarray, Node | None] | None:
    """(the ids placeholder [N, L], the table [V, D], the Reshape holding the ids as [N, 1, L] already or None) where `node`
    gathers the rows of a constant table by the network's integer input."""
    if node.op != "GatherV2" or int(node.attr("batch_dims", 0) or 0) != 0:
        return None
    table, axis = constant_of(graph, by_name, node.inputs[0]), constant_of(graph, by_name, node.inputs[2])
    ids_tensor, held = _ids_of(by_name, node.inputs[1])
    ids = by_name.get(tensor_node(ids_tensor))
    shape = ids.output_shapes[0] if ids is not None and ids.output_shapes else None
    if table is None or axis is None or int(axis) != 0 or table.ndim != 2 or not is_ids_input(ids) or shape is None or len(shape) != 2:
        return None
    if ids.name not in {tensor_node(tensor) for tensor in graph.input_tensors}:
        return None
    return ids, table, held


def token_lookups(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite: an Embedding of the network's integer ids [N, L] as the gather of the ids held as the image
    [N, 1, L], giving the image [N, 1, L, D], and the sequence [N, L, D] it holds under the Embedding's name (a .tflite's
    GATHER of its ids already RESHAPEd to [N, 1, L] gives the image itself)."""
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        found = _lookup(graph, by_name, node)
        if found is None:
            continue
        ids, table, held = found
        batch, length = ids.output_shapes[0]
        replacements[ids.name] = [copy_node(ids, attrs={**ids.attrs, "shape": {"shape": [batch, 1, length]}}, output_shapes=[])]
        if held is not None:
            replacements[held.name] = []
            replacements[node.name] = [copy_node(node, inputs=[node.inputs[0], f"{ids.name}:0", node.inputs[2]], output_shapes=[])]
        else:
            image = copy_node(node, name=f"{node.name}/image", inputs=[node.inputs[0], f"{ids.name}:0", node.inputs[2]], output_shapes=[])
            squeeze = Node(node.name, "Squeeze", [image.name], {"T": {"type": "float32"}, "squeeze_dims": {"list_i": [1]}})
            replacements[node.name] = [image, squeeze]
        notes.append(f"{node.name}: an Embedding of {table.shape[0]} rows of {table.shape[1]} looked up by the ids {ids.name} held "
                     f"as the image [N, 1, {length}]")
    return replacements, constants, notes


def vocabulary_of(graph: Graph, tensor: str) -> int | None:
    """The rows of the smallest table the network's integer input `tensor` indexes (every id must be below it), or None
    for an input that is not token ids."""
    by_name = graph.by_name()
    if not is_ids_input(by_name.get(tensor_node(tensor))):
        return None
    rows = [int(np.shape(graph.constants[tensor_node(node.inputs[0])])[0]) for node in graph.nodes if node.op == "GatherV2"
            and tensor_node(node.inputs[0]) in graph.constants
            and canonical_tensor(_ids_of(by_name, node.inputs[1])[0]) == canonical_tensor(tensor)]
    return min(rows) if rows else None


def reads_token_ids(graph: Graph) -> bool:
    """Some input of `graph` is integer token ids (a text model's)."""
    by_name = graph.by_name()
    return any(is_ids_input(by_name.get(tensor_node(tensor))) for tensor in graph.input_tensors)


def check_token_ids(samples, graph: Graph, key: str) -> None:
    """Token ids fed to a text model must be integers in [0, vocabulary) of its Embedding, and an input of float values is
    fed no integers (an .npz of ids for another model), checked before any is fed: a GraphError naming the data, the
    first wrong id and the vocabulary, not TensorFlow's "indices[..] is not in [0, V)"."""
    by_name = graph.by_name()
    # one sample tells an input's type; only token ids need the whole split read (to find an id outside the vocabulary)
    for tensor, values in named_samples(samples[:] if reads_token_ids(graph) else samples[:1], graph, key).items():
        values = np.asarray(values)
        if not is_ids_input(by_name.get(tensor_node(tensor))):
            if values.dtype.kind in "iu":
                raise GraphError(f"{key}: the samples of {samples.source} are integers, and the model's input {tensor} takes float32 "
                                 "values: save them as float32 (integers are the token ids of an input read by an Embedding)")
            continue
        if values.dtype.kind not in "iu":
            raise GraphError(f"{key}: the samples of {samples.source} are {values.dtype}; the model's input {tensor} takes integer "
                             "token ids: save them as int32")
        vocabulary = vocabulary_of(graph, tensor)
        wrong = (values < 0) | (values >= (vocabulary or np.iinfo(np.int32).max))
        if np.any(wrong):
            position = [int(axis) for axis in np.argwhere(wrong)[0]]
            raise GraphError(f"{key}: the samples of {samples.source} hold the token id {int(values[tuple(position)])} at {position}; "
                             f"the model's Embedding has {vocabulary} rows, so every id must be in [0, {vocabulary}): map unknown "
                             "words to an id the model was trained with")
