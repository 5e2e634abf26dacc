"""Canonical forms: TensorFlow and Keras idioms rewritten into the ops the IR's patterns know.

Each rewrite keeps every value of the graph (fold_check verifies the rewritten graph against the
original on data) and the names readers and end points use:

Twelve run before BatchNorm folding (EARLY_REWRITES), the rest after it:

- `static_reshape`: a Reshape whose shape is computed from the input's dynamic shape (Keras
  Flatten, a Reshape with a dynamic batch: Shape -> StridedSlice -> Pack) reads the constant
  [-1, ...] of its static output shape instead;
- `zero_states`, `time_steps`, `stacked_steps`, `split_gates`, `sliced_gates` (recurrent.py): an unrolled LSTM, GRU or SimpleRNN's
  zero initial state propagated away, its time steps as slices of the sequence, its outputs stacked back by a
  concatenation along time, each gate a Dense of its own;
- `token_lookups` (embedding.py): an Embedding of the network's integer token ids as the gather of the ids held
  as the image [N, 1, L], the Keras wrap of negative ids dropped (ids are checked against the vocabulary);
- `einsums_as_batch_matmuls`, `head_bias_before_split` (attention.py): a multi-head attention's Einsums of two
  activations as Transposes and a BatchMatMulV2, its projections' biases added before the heads are split;
- `dense_on_signals` (signals.py): a Dense on every time step of a signal (Keras 3's Tensordot) as the 1x1
  Conv1D it is;
- `signals_as_images` (signals.py): a network on 1-D signals [N, L, C] held as images [N, 1, L, C],
  so Keras' 1-D layers are the 2-D ops TensorFlow computes them with;
- `layer_normalization` (layer_norm.py): Keras' LayerNormalization over the channels as a centring conv, the
  square, a variance conv, Rsqrt and products, layers every target has;
- `keepdims_mean`: a spatial Mean without keep_dims (Keras GlobalAveragePooling2D) becomes the
  Mean with keep_dims and a Squeeze of H and W;
- `global_max_as_pool`: a spatial Max (Keras GlobalMaxPooling1D/2D) becomes a MaxPool whose window is the
  whole image, and a Squeeze of H and W without keep_dims;
- `repeat_as_resize`: Keras 3's nearest UpSampling2D, ExpandDims -> Tile -> Reshape along H or
  W, becomes one ResizeNearestNeighbor along that axis;
- `merged_nearest_resizes`: a nearest resize of H only read only by one of W only (or the other
  way round) becomes one resize of both: TensorFlow picks each axis's source index on its own,
  and an axis kept at its size maps every index to itself, so the result is the same;
- `vector_scales`, `one_minus_sigmoid` (recurrent.py): a vector [N, C] times a constant per unit as the Dense of their
  diagonal; 1 - sigmoid(g) of a Dense g as sigmoid(-g) of the Dense negated.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from core.frontend.graph import Graph, Node, tensor_node
from core.frontend.rewrite import const_node, constant_of, copy_node, finish, readers_of, unique_name
from core.frontend.attention import einsums_as_batch_matmuls, head_bias_before_split
from core.frontend.embedding import token_lookups
from core.frontend.layer_norm import layer_normalization
from core.frontend.recurrent import (one_minus_sigmoid, sliced_gates, split_gates, stacked_steps, time_steps, vector_scales,
                                     zero_states)
from core.frontend.signals import dense_on_signals, signals_as_images

Replacements = dict[str, list[Node]]  # node name -> the nodes standing in its place (in order)
Rewrite = Callable[[Graph, dict[str, Node]], tuple[Replacements, dict[str, np.ndarray], list[str]]]


def static_reshape(graph: Graph, by_name: dict[str, Node]):
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        if node.op != "Reshape" or constant_of(graph, by_name, node.inputs[1]) is not None:
            continue
        shape = node.output_shapes[0] if node.output_shapes else None
        if shape is None or len(shape) < 1 or any(dim < 0 for dim in shape[1:]):
            continue
        name = f"{node.name}/static_shape"
        value = np.asarray([-1, *shape[1:]], np.int32)
        constants[name] = value
        replacements[node.name] = [const_node(name, value), copy_node(node, inputs=[node.inputs[0], name])]
        notes.append(f"{node.name}: shape computed at run time -> {value.tolist()}")
    return replacements, constants, notes


def _spatial_reductions(graph: Graph, by_name: dict[str, Node], op: str):
    """The `op` nodes reducing H and W (only) of a 4-D tensor, each with its input's shape."""
    for node in graph.nodes:
        axes = constant_of(graph, by_name, node.inputs[1]) if node.op == op else None
        shape = graph.shape(node.inputs[0]) if axes is not None else None
        if shape is not None and len(shape) == 4 and sorted(int(a) % 4 for a in axes.reshape(-1)) == [1, 2]:
            yield node, shape


def _squeezed(node: Node, kept: Node) -> Node:
    """`node`'s output (H and W dropped) from `kept`'s [N, 1, 1, C]."""
    return Node(node.name, "Squeeze", [kept.name], {"T": dict(node.attrs["T"]), "squeeze_dims": {"list_i": [1, 2]}})


def keepdims_mean(graph: Graph, by_name: dict[str, Node]):
    replacements, notes = {}, []
    for node, _ in _spatial_reductions(graph, by_name, "Mean"):
        if node.attr("keep_dims", False):
            continue
        mean = copy_node(node, name=f"{node.name}/keep_dims", attrs={**node.attrs, "keep_dims": {"b": True}})
        replacements[node.name] = [mean, _squeezed(node, mean)]
        notes.append(f"{node.name}: Mean over H, W without keep_dims -> Mean with keep_dims + Squeeze")
    return replacements, {}, notes


def global_max_as_pool(graph: Graph, by_name: dict[str, Node]):
    replacements, notes = {}, []
    for node, shape in _spatial_reductions(graph, by_name, "Max"):
        if min(shape[1:3]) < 1:
            continue
        keep_dims = bool(node.attr("keep_dims", False))
        window = {"list_i": [1, shape[1], shape[2], 1]}
        pool = Node(node.name if keep_dims else f"{node.name}/window", "MaxPool", [node.inputs[0]],
                    {"T": dict(node.attrs["T"]), "ksize": window, "strides": {"list_i": [1, 1, 1, 1]}, "padding": {"s": "VALID"},
                     "data_format": {"s": "NHWC"}})
        replacements[node.name] = [pool] if keep_dims else [pool, _squeezed(node, pool)]
        notes.append(f"{node.name}: Max over H, W -> MaxPool of window {shape[1]} x {shape[2]}{'' if keep_dims else ' + Squeeze'}")
    return replacements, {}, notes


def _repeat(graph: Graph, by_name: dict[str, Node], readers, reshape: Node) -> tuple[str, int, int] | None:
    """(the repeated tensor, its axis, the factor) when `reshape` ends an ExpandDims -> Tile repeat."""
    tile = by_name.get(tensor_node(reshape.inputs[0]))
    if tile is None or tile.op != "Tile" or len(readers.get(f"{tile.name}:0", [])) != 1:
        return None
    expand = by_name.get(tensor_node(tile.inputs[0]))
    if expand is None or expand.op != "ExpandDims" or len(readers.get(f"{expand.name}:0", [])) != 1:
        return None
    dim, multiples = constant_of(graph, by_name, expand.inputs[1]), constant_of(graph, by_name, tile.inputs[1])
    shape = graph.shape(expand.inputs[0])
    if dim is None or multiples is None or shape is None or len(shape) != 4 or multiples.size != 5:
        return None
    axis = int(dim.reshape(-1)[0]) % 5 - 1  # the input axis the copies follow
    factors = [int(m) for m in multiples.reshape(-1)]
    if axis not in (1, 2) or any(f != 1 for k, f in enumerate(factors) if k != axis + 1):
        return None
    expected = list(shape)
    expected[axis] *= factors[axis + 1]
    if reshape.output_shapes[0] is None or list(reshape.output_shapes[0][1:]) != expected[1:]:
        return None
    return expand.inputs[0], axis, factors[axis + 1]


def repeat_as_resize(graph: Graph, by_name: dict[str, Node]):
    replacements, constants, notes = {}, {}, []
    readers = readers_of(graph)
    for node in graph.nodes:
        found = _repeat(graph, by_name, readers, node) if node.op == "Reshape" else None
        if found is None:
            continue
        source, axis, factor = found
        height, width = graph.shape(source)[1:3]
        size = np.asarray([height * factor, width] if axis == 1 else [height, width * factor], np.int32)
        name = f"{node.name}/size"
        constants[name] = size
        resize = Node(node.name, "ResizeNearestNeighbor", [source, name],
                      {"T": {"type": "float32"}, "align_corners": {"b": False}, "half_pixel_centers": {"b": False}})
        replacements[node.name] = [const_node(name, size), resize]
        notes.append(f"{node.name}: repeat x{factor} along {'HW'[axis - 1]} (ExpandDims -> Tile -> Reshape) -> ResizeNearestNeighbor")
    return replacements, constants, notes


def _resized_axes(graph: Graph, node: Node) -> set[int]:
    before, after = graph.shape(node.inputs[0]), node.output_shapes[0] if node.output_shapes else None
    if before is None or after is None or len(before) != 4 or len(after) != 4:
        return {1, 2}
    return {axis for axis in (1, 2) if before[axis] != after[axis]}


def merged_nearest_resizes(graph: Graph, by_name: dict[str, Node]):
    replacements, constants, notes = {}, {}, []
    readers, taken = readers_of(graph), set(by_name)
    for node in graph.nodes:
        first = by_name.get(tensor_node(node.inputs[0])) if node.op == "ResizeNearestNeighbor" else None
        if first is None or first.op != "ResizeNearestNeighbor" or first.name in replacements or len(readers.get(f"{first.name}:0", [])) != 1:
            continue
        flags = ("align_corners", "half_pixel_centers")
        if any(bool(first.attr(flag, False)) != bool(node.attr(flag, False)) for flag in flags):
            continue
        if _resized_axes(graph, first) & _resized_axes(graph, node):
            continue
        size = np.asarray(node.output_shapes[0][1:3], np.int32)
        name = unique_name(f"{node.name}/merged_size", taken)
        constants[name] = size
        replacements[first.name] = []
        replacements[node.name] = [const_node(name, size), copy_node(node, inputs=[first.inputs[0], name])]
        notes.append(f"{first.name} and {node.name}: nearest resizes of H and of W -> one ResizeNearestNeighbor to {size.tolist()}")
    return replacements, constants, notes


# before BatchNorm folding, which looks for the conv before a BatchNorm: a Conv1D's Squeeze would hide it
EARLY_REWRITES: tuple[Rewrite, ...] = (static_reshape, zero_states, time_steps, stacked_steps, split_gates, sliced_gates,
                                       token_lookups, einsums_as_batch_matmuls, head_bias_before_split, dense_on_signals, signals_as_images,
                                       layer_normalization)
REWRITES: tuple[Rewrite, ...] = (keepdims_mean, global_max_as_pool, repeat_as_resize, merged_nearest_resizes, vector_scales,
                                 one_minus_sigmoid)


def canonicalize(graph: Graph, rewrites: tuple[Rewrite, ...] = REWRITES) -> tuple[Graph, list[str]]:
    """The graph with every rewrite of `rewrites` applied (in order, each on the previous one's result), and
    a line per change."""
    notes: list[str] = []
    for rewrite in rewrites:
        replacements, constants, changed = rewrite(graph, graph.by_name())
        if not replacements:
            continue
        nodes = [new for node in graph.nodes for new in replacements.get(node.name, [copy_node(node)])]
        graph = finish(graph, nodes, {**graph.constants, **constants})
        notes += changed
    return graph, notes
