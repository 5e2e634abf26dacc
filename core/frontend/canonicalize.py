"""Canonical forms: TensorFlow and Keras idioms rewritten into the ops the IR's patterns know.

Each rewrite keeps every value of the graph (fold_check verifies the rewritten graph against the
original on data) and the names readers and end points use:

Nineteen run before BatchNorm folding (EARLY_REWRITES), the rest after it:

- `grouped_as_depthwise` (grouped.py): a Conv2D of as many groups as input channels (its filter [kh, kw, 1, O] on C > 1
  channels: Keras 3's grouped convolution, keras-hub's MobileNetV3's depthwise layers) as the DepthwiseConv2dNative it
  is; of fewer groups, as the Conv2D of its block-diagonal filter;
- `static_reshape`: a Reshape whose shape is computed from the input's dynamic shape (Keras
  Flatten, a Reshape with a dynamic batch: Shape -> StridedSlice -> Pack) reads the constant
  [-1, ...] of its static output shape instead;
- `layout_round_trips`: Transposes and Reshapes that move no element of a sample, with element-wise nodes of constants
  between them (litert-torch's BatchNorm1d in PyTorch's channel-first view; a map to tokens through PyTorch's layout),
  as those nodes on the map itself and one Reshape;
- `reductions_through_layouts`: a Mean of a map viewed in another layout (litert-torch's channel-first Transpose and
  Reshape) whose kept axes stay in order, as the Mean of the map itself;
- `zero_states`, `time_steps`, `stacked_steps`, `split_gates`, `sliced_gates` (recurrent.py): an unrolled LSTM, GRU or SimpleRNN's
  zero initial state propagated away, its time steps as slices of the sequence, its outputs stacked back by a
  concatenation along time, each gate a Dense of its own;
- `token_lookups` (embedding.py): an Embedding of the network's integer token ids as the gather of the ids held
  as the image [N, 1, L], the Keras wrap of negative ids dropped (ids are checked against the vocabulary);
- `einsums_as_batch_matmuls`, `head_bias_before_split` (attention.py): a multi-head attention's Einsums of two
  activations as Transposes and a BatchMatMulV2, its projections' biases added before the heads are split;
- `axis_slices_as_crops` (axis_slices.py): a StridedSlice of one axis L of [N, *before, L, *after] (a ViT's class
  token; PyTorch's q, k and v out of one packed projection) as the crop along W of the image
  [N, prod(before), L, prod(after)], before the signals are lifted (a step or gate sliced is
  one), and again after BatchNorm folding for a slice whose shape is known only then (of a concatenation with Keras'
  tiled class token);
- `dense_on_signals` (signals.py): a Dense on every time step of a signal (Keras 3's Tensordot) as the 1x1
  Conv1D it is;
- `signals_as_images` (signals.py): a network on 1-D signals [N, L, C] held as images [N, 1, L, C],
  so Keras' 1-D layers are the 2-D ops TensorFlow computes them with;
- `kept_statistics` (layer_norm.py): a LayerNorm's statistics as LiteRT's converter writes them (Means over the channels
  without keep_dims, Reshaped back) as Keras' (Means with keep_dims);
- `layer_normalization` (layer_norm.py): Keras' LayerNormalization over the channels as a centring conv, the
  square, a variance conv, Rsqrt and products, layers every target has;
- `prelu_differences`: litert-torch's PReLU, relu(x) - k relu(c x) (a Sub of two activations), as Keras' sum
  relu(x) + (-k) relu(c x), a per-channel -k joining the per-channel layer before it;
- `leaky_relu_sums`: relu(x) + k relu(c x) of scalars k, c (a PReLU of one slope, as Keras and litert-torch write it) as
  the LeakyRelu it is where c < 0 and its slope -k|c| is at least 0;
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
  diagonal; 1 - sigmoid(g) of a Dense g as sigmoid(-g) of the Dense negated;
- `tiled_constants`, `constant_operands` (batched_constant.py): a constant tiled to the batch of a tensor (Keras' class
  token), and a constant operand of an Add of a value for every element (a position
  embedding), or of a concatenation (a class token), broadcast to the batch of the other operand, as the .tflite importer
  writes it: the IR's constant layer.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from core.frontend.graph import Graph, Node, canonical_tensor, tensor_node
from core.frontend.grouped import grouped_as_depthwise
from core.frontend.rewrite import const_node, constant_of, copy_node, finish, readers_of, unique_name
from core.frontend.attention import einsums_as_batch_matmuls, head_bias_before_split
from core.frontend.batched_constant import constant_operands, tiled_constants
from core.frontend.embedding import token_lookups
from core.frontend.layer_norm import kept_statistics, layer_normalization
from core.frontend.recurrent import (one_minus_sigmoid, sliced_gates, split_gates, stacked_steps, time_steps, vector_scales,
                                     zero_states)
from core.frontend.signals import dense_on_signals, signals_as_images
from core.frontend.axis_slices import axis_slices_as_crops

# a leaky ReLU's slope below zero, at most: past it LiteRT's requantization of the slope overflows int32
MAX_LEAKY_SLOPE = 2.0**15

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


def _scaled(graph: Graph, by_name: dict[str, Node], tensor: str) -> tuple[str, float]:
    """(t, k) where `tensor` is k times t by a chain of Neg and Mul by scalar constants (k = 1 where there is none)."""
    factor = 1.0
    while (node := by_name.get(tensor_node(tensor))) is not None and node.op in ("Neg", "Mul"):
        if node.op == "Neg":
            factor, tensor = -factor, node.inputs[0]
            continue
        scalars = [value for value in (constant_of(graph, by_name, operand) for operand in node.inputs) if value is not None and value.size == 1]
        if len(node.inputs) != 2 or len(scalars) != 1:
            break
        factor *= float(scalars[0].reshape(-1)[0])
        tensor = next(operand for operand in node.inputs if constant_of(graph, by_name, operand) is None)
    return tensor, factor


def _negative_half(graph: Graph, by_name: dict[str, Node], tensor: str, source: str) -> Node | None:
    """The Mul of `tensor` when it is k relu(c x) of `source` x, c < 0 a scalar and k a constant (scalar or per channel)."""
    scale = by_name.get(tensor_node(tensor))
    if scale is None or scale.op != "Mul" or len(scale.inputs) != 2:
        return None
    constants = [operand for operand in scale.inputs if constant_of(graph, by_name, operand) is not None]
    below = by_name.get(tensor_node(next((operand for operand in scale.inputs if operand not in constants), "")))
    if len(constants) != 1 or below is None or below.op != "Relu":
        return None
    inner_source, inner = _scaled(graph, by_name, below.inputs[0])
    return scale if inner < 0 and canonical_tensor(inner_source) == canonical_tensor(source) else None


def prelu_differences(graph: Graph, by_name: dict[str, Node]):
    """relu(x) - k relu(c x) (litert-torch's PReLU: a SUB of two activations, which the IR has no layer for) as
    relu(x) + (-k) relu(c x), the sum Keras' PReLU computes: a per-channel k joins the per-channel layer before it."""
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        relu = by_name.get(tensor_node(node.inputs[0])) if node.op == "Sub" and len(node.inputs) == 2 else None
        scale = _negative_half(graph, by_name, node.inputs[1], relu.inputs[0]) if relu is not None and relu.op == "Relu" else None
        if scale is None:
            continue
        (k,) = [operand for operand in scale.inputs if constant_of(graph, by_name, operand) is not None]
        below = next(operand for operand in scale.inputs if operand != k)
        constants[negated := f"{node.name}/negated_slope"] = -np.asarray(constant_of(graph, by_name, k), np.float32)
        scaled = Node(f"{node.name}/negative_half", "Mul", [below, negated], {"T": dict(node.attrs["T"])})
        replacements[node.name] = [const_node(negated, constants[negated]), scaled,
                                   Node(node.name, "AddV2", [node.inputs[0], scaled.name], {"T": dict(node.attrs["T"])})]
        notes.append(f"{node.name}: relu(x) - k relu(c x) -> relu(x) + (-k) relu(c x)")
    return replacements, constants, notes


def leaky_relu_sums(graph: Graph, by_name: dict[str, Node]):
    """relu(x) + k relu(c x) is x for x > 0 and -k|c| x below when c < 0: the LeakyRelu of that slope, one lookup table
    every target writes (TFLite's LEAKY_RELU), where the sum's pieces are each scalar scales no target writes alone."""
    replacements, notes = {}, []
    for node in graph.nodes:
        if node.op not in ("Add", "AddV2") or len(node.inputs) != 2:
            continue
        for positive, other in (node.inputs, node.inputs[::-1]):
            relu = by_name.get(tensor_node(positive))
            scaled, outer = _scaled(graph, by_name, other)
            below = by_name.get(tensor_node(scaled))
            if relu is None or relu.op != "Relu" or below is None or below.op != "Relu" or below is relu:
                continue
            source, inner = _scaled(graph, by_name, below.inputs[0])
            alpha = -outer * abs(inner)
            if canonical_tensor(source) != canonical_tensor(relu.inputs[0]) or inner >= 0 or not 0.0 <= alpha <= MAX_LEAKY_SLOPE:
                continue
            replacements[node.name] = [Node(node.name, "LeakyRelu", [relu.inputs[0]], {"T": dict(node.attrs["T"]), "alpha": {"f": alpha}})]
            notes.append(f"{node.name}: relu(x) + {outer:g} relu({inner:g} x) -> LeakyRelu of alpha {alpha:g}")
            break
    return replacements, {}, notes


def _axis_groups(source: list[int], target: list[int]) -> list[tuple[list[int], list[int]]] | None:
    """The axes of a reshape from `source` to `target` in groups of equal size, (source axes, target axes) each, in order
    (a merge, a split, or one to one); None where the sizes do not group so."""
    groups, i, j = [], 0, 0
    while i < len(source) or j < len(target):
        first, second, size_first, size_second = [i], [j], source[i] if i < len(source) else 1, target[j] if j < len(target) else 1
        i, j = i + 1, j + 1
        while size_first != size_second:
            if size_first < size_second and i < len(source):
                first.append(i)
                size_first, i = size_first * source[i], i + 1
            elif size_second < size_first and j < len(target):
                second.append(j)
                size_second, j = size_second * target[j], j + 1
            else:
                return None
        groups.append(([axis for axis in first if axis < len(source)], [axis for axis in second if axis < len(target)]))
    return groups


def _source_axes(graph: Graph, by_name: dict[str, Node], tensor: str) -> tuple[str, list[list[int]]] | None:
    """(x, the axes of x each axis of `tensor` holds) where `tensor` is x through a Transpose and a Reshape (either left
    out) that keeps the batch axis; None where it is not."""
    node = by_name.get(tensor_node(tensor))
    reshaped = node if node is not None and node.op == "Reshape" else None
    if reshaped is not None:
        node = by_name.get(tensor_node(reshaped.inputs[0]))
    transpose = node if node is not None and node.op == "Transpose" else None
    source = transpose.inputs[0] if transpose is not None else (reshaped.inputs[0] if reshaped is not None else None)
    shape = graph.shape(source) if source is not None else None
    permutation = constant_of(graph, by_name, transpose.inputs[1]) if transpose is not None else np.arange(len(shape or []))
    if shape is None or permutation is None or len(permutation) != len(shape) or int(permutation.reshape(-1)[0]) != 0:
        return None
    moved = [int(axis) for axis in permutation.reshape(-1)]
    if reshaped is None:
        return canonical_tensor(source), [[axis] for axis in moved]
    target = graph.shape(f"{reshaped.name}:0")
    groups = _axis_groups([shape[axis] for axis in moved[1:]], list(target[1:])) if target is not None else None
    if groups is None:
        return None
    held: list[list[int]] = [[0]] + [[] for _ in target[1:]]
    for first, second in groups:
        parts = [axis for axis in second if target[axis + 1] != 1]
        if len(second) > 1 and (len(first) > 1 or len(parts) > 1):
            return None  # an axis of x split in several: no axis of the target is one of x's
        of_x = [moved[k + 1] for k in first]
        for axis in parts or second[:1]:
            held[axis + 1] = [x_axis for x_axis in of_x if shape[x_axis] != 1] or of_x  # axes of size 1 merged in hold nothing
    return canonical_tensor(source), held


# the most elements a chain of layout changes is traced through (an int64 index per element of one sample)
TRACED_ELEMENTS = 1 << 22


LAYOUT_OPS = ("Transpose", "Reshape")
WITH_A_CONSTANT = ("Mul", "Add", "AddV2", "Sub", "RealDiv", "Maximum", "Minimum")  # element-wise, one operand a constant
UNARY = ("Relu", "Relu6", "Sigmoid", "Tanh", "Elu", "Selu", "Neg", "Identity")


def _on_chain(graph: Graph, by_name: dict[str, Node], node: Node) -> str | None:
    """The one computed input of `node` when it is a layout change or element-wise of it and constants, else None."""
    if node.op in LAYOUT_OPS or node.op in UNARY:
        return node.inputs[0]
    if node.op in WITH_A_CONSTANT and len(node.inputs) == 2:
        computed = [t for t in node.inputs if constant_of(graph, by_name, t) is None]
        return computed[0] if len(computed) == 1 else None
    return None


def _layout_chain(graph: Graph, by_name: dict[str, Node], readers, node: Node) -> list[Node]:
    """`node` and the Transposes, Reshapes and element-wise nodes before it, each read by the next alone."""
    chain = [node]
    while (source := _on_chain(graph, by_name, chain[-1])) is not None:
        producer = by_name.get(tensor_node(source))
        if producer is None or _on_chain(graph, by_name, producer) is None or len(readers.get(f"{producer.name}:0", [])) != 1:
            break
        chain.append(producer)
    return chain[::-1]


def _in_source_layout(graph: Graph, by_name: dict[str, Node], chain: list[Node]) -> list[tuple[Node, np.ndarray | None]] | None:
    """The chain's element-wise nodes, each with its constant in the layout of the chain's input (a per-channel vector
    where it varies along the channels only), where the layout changes together move no element of a sample (traced
    on the indices of one sample of the batch, which every Transpose keeps first); else None."""
    shape = graph.shape(chain[0].inputs[0])
    if shape is None or any(dim is None or dim < 0 for dim in shape[1:]) or int(np.prod(shape[1:])) > TRACED_ELEMENTS:
        return None
    places = np.arange(int(np.prod(shape[1:]))).reshape(1, *shape[1:])
    elementwise: list[tuple[Node, np.ndarray | None]] = []
    for node in chain:
        operand = constant_of(graph, by_name, node.inputs[1]) if len(node.inputs) > 1 else None
        if node.op == "Transpose" and operand is not None and [int(axis) for axis in operand.reshape(-1)][:1] == [0]:
            places = places.transpose([int(axis) for axis in operand.reshape(-1)])
        elif node.op == "Reshape" and (output := graph.shape(f"{node.name}:0")) is not None:
            if any(dim is None or dim < 0 for dim in output[1:]) or int(np.prod(output[1:])) != places.size:
                return None  # a reshape that merges the batch (Keras 3's Tensordot) is no layout of one sample
            places = places.reshape(1, *output[1:])
        elif node.op in UNARY:
            elementwise.append((node, None))
        elif node.op in WITH_A_CONSTANT:
            constant = next(constant_of(graph, by_name, t) for t in node.inputs if constant_of(graph, by_name, t) is not None)
            try:
                spread = np.broadcast_to(constant, places.shape)
            except ValueError:
                return None
            moved = np.empty(places.size, constant.dtype)
            moved[places.reshape(-1)] = spread.reshape(-1)
            moved = moved.reshape(1, *shape[1:])
            channels = moved.reshape(-1, shape[-1])
            elementwise.append((node, channels[0] if np.all(channels == channels[:1]) else moved))
        else:
            return None
    return elementwise if np.array_equal(places.reshape(-1), np.arange(places.size)) else None


def layout_round_trips(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite: Transposes and Reshapes that, together, leave every element of a sample in its place, with
    element-wise nodes of constants between them (litert-torch's BatchNorm1d: to PyTorch's channel-first view, a MUL and
    an ADD per channel, back; its map flattened to tokens through PyTorch's layout) as those element-wise nodes on the
    chain's input, their constants moved to its layout, and one Reshape."""
    replacements, constants, notes = {}, {}, []
    readers = readers_of(graph)
    for last in graph.nodes:
        following = [reader for reader, _ in readers.get(f"{last.name}:0", [])]
        if _on_chain(graph, by_name, last) is None or len(following) == 1 and _on_chain(graph, by_name, following[0]) is not None:
            continue  # not on a chain, or not its end: the chain goes on into its one reader
        chain = _layout_chain(graph, by_name, readers, last)
        layouts = [k for k, link in enumerate(chain) if link.op in LAYOUT_OPS]
        if not layouts:
            continue
        chain = chain[layouts[0]:layouts[-1] + 1]  # element-wise nodes before the first layout change and after the last stay
        node = chain[-1]
        if sum(link.op == "Transpose" for link in chain) < 1 or len(chain) < 2:
            continue
        elementwise = _in_source_layout(graph, by_name, chain)
        if elementwise is None:
            continue
        nodes, value = [], chain[0].inputs[0]
        for position, (original, constant) in enumerate(elementwise):
            inputs = [value]
            if constant is not None:
                constants[name := f"{node.name}/constant_{position}"] = constant
                nodes.append(const_node(name, constant))
                inputs = [value, name] if constant_of(graph, by_name, original.inputs[1]) is not None else [name, value]
            nodes.append(copy_node(original, name=f"{node.name}/{original.op.lower()}_{position}", inputs=inputs))
            value = f"{nodes[-1].name}:0"
        constants[shape_name := f"{node.name}/shape"] = np.asarray([-1, *graph.shape(f"{node.name}:0")[1:]], np.int32)
        nodes += [const_node(shape_name, constants[shape_name]),
                  Node(node.name, "Reshape", [value, shape_name], {"T": {"type": "float32"}, "Tshape": {"type": "int32"}})]
        replacements[node.name] = nodes
        notes.append(f"{node.name}: {len(chain) - len(elementwise)} Transposes and Reshapes that move no element"
                     f"{f', around {len(elementwise)} element-wise node(s),' if elementwise else ''} -> one Reshape")
    return replacements, constants, notes


def reductions_through_layouts(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite: a Mean without keep_dims of x moved to another layout (litert-torch's channel-first view of a
    channel-last map: a Transpose to [N, C, H, W], a Reshape to [N, C, H x W] or dropping an axis of size 1) whose kept
    axes are x's in x's order, as the Mean of x itself over the axes it reduces of x (a global average of a map in
    PyTorch's layout: the spatial Mean every target has)."""
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        axes = constant_of(graph, by_name, node.inputs[1]) if node.op == "Mean" and not node.attr("keep_dims", False) else None
        found = _source_axes(graph, by_name, node.inputs[0]) if axes is not None else None
        if found is None or tensor_node(found[0]) == tensor_node(node.inputs[0]):
            continue
        source, held = found
        reduced = {int(axis) % len(held) for axis in axes.reshape(-1)}
        shape, output = graph.shape(source), graph.shape(f"{node.name}:0")
        kept = [held[k] for k in range(1, len(held)) if k not in reduced and held[k]]
        if 0 in reduced or shape is None or output is None or any(len(axes_of_x) != 1 for axes_of_x in kept):
            continue
        kept_axes = [axes_of_x[0] for axes_of_x in kept]
        if kept_axes != sorted(set(kept_axes)) or list(output[1:]) != [shape[axis] for axis in kept_axes]:
            continue
        name = f"{node.name}/source_axes"
        constants[name] = np.asarray([axis for axis in range(1, len(shape)) if axis not in kept_axes], np.int32)
        replacements[node.name] = [const_node(name, constants[name]), copy_node(node, inputs=[source, name])]
        notes.append(f"{node.name}: a Mean of {source} in another layout -> its Mean over axes {constants[name].tolist()}")
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
EARLY_REWRITES: tuple[Rewrite, ...] = (grouped_as_depthwise, static_reshape, layout_round_trips, reductions_through_layouts, zero_states, time_steps, stacked_steps, split_gates, sliced_gates,
                                       token_lookups, einsums_as_batch_matmuls, head_bias_before_split, axis_slices_as_crops, dense_on_signals, kept_statistics, signals_as_images,
                                       layer_normalization, prelu_differences, leaky_relu_sums)
REWRITES: tuple[Rewrite, ...] = (keepdims_mean, global_max_as_pool, repeat_as_resize, merged_nearest_resizes, vector_scales,
                                 one_minus_sigmoid, axis_slices_as_crops, tiled_constants, constant_operands)


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
