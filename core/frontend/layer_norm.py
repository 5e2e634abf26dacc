"""Keras' LayerNormalization over the channels, rewritten as layers every target has, computing the same values.

Keras writes it as moments (Mean, SquaredDifference, Mean), Rsqrt(variance + epsilon), and
x * (inv * gamma) + (beta - mean * (inv * gamma)). Quantized as written (TFLite's converter does), the products
x * inv * gamma and mean * inv * gamma each get an int8 grid of their own and their difference cancels most of
both. Here the centring comes first, so every tensor after it holds the normalized values on a grid of their size:

    centred    = x + Conv1x1(x, -1 / C)        every output channel is -mean(x), exact in int8 (weights -127,
                                                 scale 1 / 127C), so the Add is of two tensors of one shape; where a
                                                 Conv2D computes x for the LayerNormalization alone, the centring is
                                                 folded into its weights and bias instead (x is never quantized:
                                                 +0.9 dB at the normalized output on a patch embedding's)
    square     = centred * centred             a lookup table (tf2ir), MUL(centred, centred) in a .tflite
    variance   = Conv1x1(square, 1 / C) + epsilon
    inverse    = Rsqrt(max(variance, 0))       a lookup table (tf2ir), RSQRT in a .tflite
    normalized = centred * inverse              broadcast over the channels
    output     = normalized * gamma + beta      a per-channel affine map (channel_affine.py)

Each line is a layer the IR has (conv, add, lut, mul, dwconv); the rewrite keeps the output's name, and fold_check
verifies the rewritten graph against the original on data. A LayerNormalization of a vector [N, C] (a classifier's
head after its global pool) or of tokens [N, L, C] (a ViT's, whose class token keeps them off the image) is computed so
on the image [N, 1, 1, C] or [N, 1, L, C], Reshaped there and back."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from core.frontend.graph import Graph, Node, canonical_tensor, tensor_node
from core.frontend.rewrite import const_node, copy_node, readers_of

_PASS_THROUGH = ("StopGradient", "Identity")
# an image [N, H, W, C], tokens [N, L, C] (a ViT's, held as [N, 1, L, C]), or a vector [N, C] (a classifier's head after its
# global pool: ConvNeXt's), held as [N, 1, 1, C]
_RANKS = (4, 3, 2)
_CONV_ATTRS = {"T": {"type": "float32"}, "strides": {"list_i": [1, 1, 1, 1]}, "padding": {"s": "VALID"},
               "data_format": {"s": "NHWC"}, "dilations": {"list_i": [1, 1, 1, 1]}, "use_cudnn_on_gpu": {"b": True}}


@dataclass
class _Linear:
    """The Conv2D (and its BiasAdd) computing x, when nothing else reads x: its weights and bias."""

    conv: Node
    bias_add: Node | None
    weights: np.ndarray
    bias: np.ndarray

    @property
    def names(self) -> set[str]:
        return {self.conv.name} | ({self.bias_add.name} if self.bias_add is not None else set())


@dataclass
class _Found:
    """One LayerNormalization's nodes in the graph."""

    source: str  # x
    channels: int
    epsilon: float
    gamma: np.ndarray | None
    beta: np.ndarray | None
    output: Node  # the final AddV2: its name is kept
    nodes: set[str]  # every node it is made of (the rewrite replaces them)
    linear: _Linear | None = None  # what computes x, when the centring folds into it
    held: tuple[int, ...] = ()  # x's shape but its batch when x is no image ([C] or [L, C]): computed on as [N, 1, 1, C] or [N, 1, L, C]


def _through(by_name: dict[str, Node], tensor: str) -> Node | None:
    node = by_name.get(tensor_node(tensor))
    while node is not None and node.op in _PASS_THROUGH:
        node = by_name.get(tensor_node(node.inputs[0]))
    return node


def _constant(graph: Graph, tensor: str | None) -> np.ndarray | None:
    """The constant `tensor` holds; None where it is computed, or where there is no tensor (an _other of none)."""
    if tensor is None:
        return None
    name = tensor_node(tensor)
    return np.asarray(graph.constants[name], np.float32) if name in graph.constants else None


def _last_axis_mean(graph: Graph, node: Node | None) -> str | None:
    """The tensor `node` averages over its last axis (keep_dims), when it is such a Mean of an image, tokens or a vector."""
    if node is None or node.op != "Mean" or not node.attr("keep_dims", False):
        return None
    axes, shape = _constant(graph, node.inputs[1]), graph.shape(node.inputs[0])
    if axes is None or shape is None or len(shape) not in _RANKS or [int(a) % len(shape) for a in axes.reshape(-1)] != [len(shape) - 1]:
        return None
    return canonical_tensor(node.inputs[0])


def _other(node: Node, tensor: str) -> str | None:
    """`node`'s input other than `tensor`, when `node` has two inputs and one is `tensor`."""
    inputs = [canonical_tensor(t) for t in node.inputs]
    if len(inputs) != 2 or tensor not in inputs:
        return None
    return inputs[1 - inputs.index(tensor)]


@dataclass
class _Moments:
    """A LayerNormalization's statistics: mean(x) and the inverse deviation 1 / sqrt(variance + epsilon), the variance
    the mean of (x - mean)^2 however it is written (SquaredDifference(x, mean), or the centred values times themselves)."""

    source: str  # x
    mean: Node
    epsilon: float
    inverse: Node  # the Rsqrt, or the Sqrt a RealDiv divides by
    centred: Node | None  # Sub(x, mean), where the variance reads it
    nodes: set[str]


def _centred_input(by_name: dict[str, Node], node: Node | None) -> tuple[str, Node] | None:
    """(x, mean node) of `node` when it is Sub(x, mean)."""
    if node is None or node.op != "Sub":
        return None
    return canonical_tensor(node.inputs[0]), _through(by_name, node.inputs[1])


def _moments(graph: Graph, by_name: dict[str, Node], inverse: Node) -> _Moments | None:
    """The moments `inverse` (a Rsqrt or Sqrt) ends, or None when the nodes before it are not a LayerNormalization's."""
    shifted = by_name.get(tensor_node(inverse.inputs[0]))
    if shifted is None or shifted.op not in ("Add", "AddV2"):
        return None
    epsilon = next((_constant(graph, t) for t in shifted.inputs if _constant(graph, t) is not None), None)
    variance = next((by_name.get(tensor_node(t)) for t in shifted.inputs if _constant(graph, t) is None), None)
    difference = by_name.get(tensor_node(variance.inputs[0])) if _last_axis_mean(graph, variance) else None
    if epsilon is None or epsilon.size != 1 or difference is None:
        return None
    centred = None
    if difference.op == "SquaredDifference":
        sides = [_through(by_name, t) for t in difference.inputs]
        means = [k for k, side in enumerate(sides) if _last_axis_mean(graph, side) == canonical_tensor(difference.inputs[1 - k])]
        if not means:
            return None
        mean, source = sides[means[0]], canonical_tensor(difference.inputs[1 - means[0]])
    elif difference.op == "Square" or (difference.op == "Mul" and canonical_tensor(difference.inputs[0]) == canonical_tensor(difference.inputs[1])):
        centred = by_name.get(tensor_node(difference.inputs[0]))
        parts = _centred_input(by_name, centred)
        if parts is None:
            return None
        source, mean = parts
    else:
        return None
    if _last_axis_mean(graph, mean) != source:
        return None
    nodes = {shifted.name, variance.name, difference.name, mean.name, inverse.name} | ({centred.name} if centred else set())
    nodes |= {n.name for n in by_name.values() if n.op in _PASS_THROUGH and _through(by_name, f"{n.name}:0") is mean}
    return _Moments(source, mean, float(epsilon.reshape(-1)[0]), inverse, centred, nodes)


def _match(graph: Graph, by_name: dict[str, Node], readers, inverse: Node) -> _Found | None:
    """The LayerNormalization whose Rsqrt (or Sqrt) is `inverse`, or None when the nodes around it are neither Keras' form
    nor the centred one the converters write."""
    moments = _moments(graph, by_name, inverse)
    if moments is None:
        return None
    channels = graph.shape(moments.source)[-1]
    keras = _keras_form(graph, by_name, readers, moments, channels) if inverse.op == "Rsqrt" and moments.centred is None else None
    found = keras or _centred_form(graph, by_name, readers, moments, channels)
    if found is None or any(v is not None and v.size not in (1, channels) for v in (found.gamma, found.beta)):
        return None
    if any(reader.name not in found.nodes for name in found.nodes - {found.output.name} for reader, _ in readers.get(f"{name}:0", [])):
        return None  # a moment read elsewhere too: the rewrite would take it away
    found.linear = _linear_producer(graph, by_name, readers, found.source, found.nodes)
    shape = graph.shape(found.source)
    if len(shape) != 4:
        if min(shape[1:]) < 1:
            return None  # tokens of a length known at run time only
        found.held = tuple(int(v) for v in shape[1:])
    return found


def _constant_factor(graph: Graph, readers, tensor: str, ops: tuple[str, ...], channels: int | None = None) -> tuple[Node, np.ndarray] | None:
    """The one reader of `tensor` that is an `ops` node of it and a constant, with that constant (of one value, or of
    `channels` when given)."""
    found = [(reader, _constant(graph, _other(reader, tensor))) for reader, _ in readers.get(tensor, []) if reader.op in ops]
    found = [(reader, value) for reader, value in found if value is not None and (channels is None or value.size in (1, channels))]
    return (found[0][0], found[0][1].reshape(-1)) if len(readers.get(tensor, [])) == 1 and found else None


def _keras_form(graph: Graph, by_name: dict[str, Node], readers, moments: _Moments, channels: int) -> _Found | None:
    """x * (inv * gamma) + (beta - mean * (inv * gamma)): Keras' form (the Neg of the mean times the inverse, then + beta),
    and LiteRT's (beta - mean * inv, a SUB, then possibly * gamma and + beta after the sum)."""
    source, mean, rsqrt = moments.source, moments.mean, moments.inverse
    inverse, gamma = f"{rsqrt.name}:0", None
    scaled = [reader for reader, _ in readers.get(inverse, []) if reader.op == "Mul" and _constant(graph, _other(reader, inverse)) is not None]
    if scaled:
        gamma = _constant(graph, _other(scaled[0], inverse)).reshape(-1)
        inverse = f"{scaled[0].name}:0"
    products = {canonical_tensor(factor): reader for reader, _ in readers.get(inverse, [])
                if reader.op == "Mul" and (factor := _other(reader, inverse)) is not None}
    if source not in products:
        return None
    offset = _offset(graph, by_name, readers, mean, products)
    if offset is None:
        return None
    (offset, beta), offset_nodes = offset
    scaled_input = products[source]
    final = [reader for reader, _ in readers.get(f"{scaled_input.name}:0", []) if reader.op in ("Add", "AddV2")
             and _other(reader, f"{scaled_input.name}:0") == f"{offset.name}:0"]
    if len(final) != 1:
        return None
    nodes = moments.nodes | offset_nodes | {scaled_input.name, final[0].name, *(reader.name for reader in scaled)}
    output = final[0]
    if gamma is None and (after := _constant_factor(graph, readers, f"{output.name}:0", ("Mul",), channels)) is not None:
        (output, gamma), beta = after, None if beta is None else beta * after[1]  # ((x - mean) inv + beta) gamma
        nodes.add(output.name)
    if (added := _constant_factor(graph, readers, f"{output.name}:0", ("Add", "AddV2"), channels)) is not None:
        output, beta = added[0], added[1] if beta is None else beta + added[1]
        nodes.add(output.name)
    return _Found(source, channels, moments.epsilon, gamma, beta, output, nodes)


def _offset(graph: Graph, by_name: dict[str, Node], readers, mean: Node, products: dict[str, Node]):
    """((the node giving beta - mean x inv, beta or None), its nodes): Keras' Neg(mean) x inv (+ beta), or LiteRT's
    beta - mean x inv (a Sub from a constant)."""
    for tensor, product in products.items():
        producer = by_name.get(tensor_node(tensor))
        if producer is not None and producer.op == "Neg" and _through(by_name, producer.inputs[0]) is mean:
            added = _constant_factor(graph, readers, f"{product.name}:0", ("Add", "AddV2"))
            return (added or (product, None)), {producer.name, product.name, *([added[0].name] if added else [])}
        if producer is mean:
            subtracted = [reader for reader, position in readers.get(f"{product.name}:0", []) if reader.op == "Sub" and position == 1
                          and _constant(graph, reader.inputs[0]) is not None]
            if len(subtracted) == 1 and len(readers.get(f"{product.name}:0", [])) == 1:
                return (subtracted[0], _constant(graph, subtracted[0].inputs[0]).reshape(-1)), {product.name, subtracted[0].name}
    return None


def _centred_form(graph: Graph, by_name: dict[str, Node], readers, moments: _Moments, channels: int) -> _Found | None:
    """(x - mean) * inv, or (x - mean) / sqrt(variance + epsilon), then * gamma and + beta (either possibly left out, gamma
    possibly multiplied into inv first): the form LiteRT's and onnx2tf's files write (SUB, SQUARED_DIFFERENCE, RSQRT)."""
    source, mean, inverse = moments.source, moments.mean, f"{moments.inverse.name}:0"
    nodes, gamma = set(moments.nodes), None
    if moments.inverse.op == "Rsqrt" and (scaled := _constant_factor(graph, readers, inverse, ("Mul",))) is not None:
        (node, gamma), inverse = scaled, f"{scaled[0].name}:0"
        nodes.add(node.name)
    if moments.inverse.op == "Rsqrt":
        normalized = [reader for reader, _ in readers.get(inverse, []) if reader.op == "Mul"]
    else:
        normalized = [reader for reader, _ in readers.get(inverse, []) if reader.op == "RealDiv" and canonical_tensor(reader.inputs[1]) == inverse]
    if len(normalized) != 1:
        return None
    centred = by_name.get(tensor_node(_other(normalized[0], inverse) or ""))
    if _centred_input(by_name, centred) != (source, mean) or (moments.centred is not None and centred is not moments.centred):
        return None
    output = normalized[0]
    nodes |= {centred.name, output.name}
    if gamma is None and (scaled := _constant_factor(graph, readers, f"{output.name}:0", ("Mul",), channels)) is not None:
        output, gamma = scaled
        nodes.add(output.name)
    beta = None
    if (added := _constant_factor(graph, readers, f"{output.name}:0", ("Add", "AddV2"), channels)) is not None:
        output, beta = added
        nodes.add(output.name)
    return _Found(source, channels, moments.epsilon, gamma, beta, output, nodes)


def _linear_producer(graph: Graph, by_name: dict[str, Node], readers, source: str, nodes: set[str]) -> _Linear | None:
    """The Conv2D (and BiasAdd) computing `source`, when its weights and bias are constants and only the
    LayerNormalization's `nodes` read `source`."""
    if any(reader.name not in nodes for reader, _ in readers.get(source, [])):
        return None
    producer = by_name.get(tensor_node(source))
    bias_add = producer if producer is not None and producer.op == "BiasAdd" and _constant(graph, producer.inputs[1]) is not None else None
    conv = by_name.get(tensor_node(bias_add.inputs[0])) if bias_add is not None else producer
    if bias_add is not None and len(readers.get(canonical_tensor(bias_add.inputs[0]), [])) != 1:
        return None
    if conv is None or conv.op != "Conv2D" or _constant(graph, conv.inputs[1]) is None:
        return None
    weights = _constant(graph, conv.inputs[1])
    bias = _constant(graph, bias_add.inputs[1]) if bias_add is not None else np.zeros(weights.shape[-1], np.float32)
    return _Linear(conv, bias_add, weights, bias)


def _centred(found: _Found, base: str, constants: dict[str, np.ndarray]) -> list[Node]:
    """The nodes computing x - mean(x) as `{base}/centred`: the Conv2D computing x with the centring folded into its
    weights and bias (each output channel less the channels' mean), so x itself is never quantized; else x plus a 1x1
    conv whose every output channel is -mean(x)."""
    if found.linear is None:
        constants[f"{base}/mean_weights"] = np.full((1, 1, found.channels, found.channels), -1.0 / found.channels, np.float32)
        return [Node(f"{base}/negated_mean", "Conv2D", [found.source, f"{base}/mean_weights"], dict(_CONV_ATTRS)),
                Node(f"{base}/centred", "AddV2", [found.source, f"{base}/negated_mean"], {"T": {"type": "float32"}})]
    linear = found.linear
    constants[f"{base}/centred_weights"] = (linear.weights - linear.weights.mean(-1, keepdims=True)).astype(np.float32)
    constants[f"{base}/centred_bias"] = (linear.bias - linear.bias.mean()).astype(np.float32)
    return [Node(f"{base}/centred_conv", "Conv2D", [linear.conv.inputs[0], f"{base}/centred_weights"], dict(linear.conv.attrs)),
            Node(f"{base}/centred", "BiasAdd", [f"{base}/centred_conv", f"{base}/centred_bias"],
                 {"T": {"type": "float32"}, "data_format": {"s": "NHWC"}})]


def _rewritten(found: _Found) -> tuple[list[Node], dict[str, np.ndarray]]:
    """The layers computing `found` on the image; a vector's or tokens' reshaped to the image [N, 1, 1, C] or [N, 1, L, C]
    and back."""
    if not found.held:
        return _rewritten_image(found, found.output.name)
    base, reshaped = found.output.name, {"T": {"type": "float32"}, "Tshape": {"type": "int32"}}
    shapes = {f"{base}/image_shape": np.asarray([-1, *[1] * (4 - 1 - len(found.held)), *found.held], np.int32),
              f"{base}/held_shape": np.asarray([-1, *found.held], np.int32)}
    nodes, constants = _rewritten_image(replace(found, source=f"{base}/as_image:0"), f"{base}/image")
    return [*(const_node(name, value) for name, value in shapes.items()),
            Node(f"{base}/as_image", "Reshape", [found.source, f"{base}/image_shape"], dict(reshaped)), *nodes,
            Node(base, "Reshape", [f"{base}/image", f"{base}/held_shape"], dict(reshaped))], constants | shapes


def _rewritten_image(found: _Found, output: str) -> tuple[list[Node], dict[str, np.ndarray]]:
    """The layers computing `found` on an image, named under the original output's name, the last one `output`."""
    base, channels = found.output.name, found.channels
    constants = {f"{base}/variance_weights": np.full((1, 1, channels, 1), 1.0 / channels, np.float32),
                 f"{base}/epsilon": np.asarray([found.epsilon], np.float32), f"{base}/zero": np.asarray(0.0, np.float32)}
    float32 = {"T": {"type": "float32"}}
    nodes = _centred(found, base, constants) + [
        Node(f"{base}/square", "Mul", [f"{base}/centred", f"{base}/centred"], dict(float32)),
        Node(f"{base}/variance_sum", "Conv2D", [f"{base}/square", f"{base}/variance_weights"], dict(_CONV_ATTRS)),
        Node(f"{base}/variance", "BiasAdd", [f"{base}/variance_sum", f"{base}/epsilon"], {**float32, "data_format": {"s": "NHWC"}}),
        # the clamp at 0 keeps the function defined at every integer of the variance's grid: a power-of-two grid holds
        # negative codes the variance never takes
        Node(f"{base}/non_negative", "Maximum", [f"{base}/variance", f"{base}/zero"], dict(float32)),
        Node(f"{base}/inverse", "Rsqrt", [f"{base}/non_negative"], dict(float32)),
    ]
    nodes += (_normalized_from_centred if found.linear else _normalized_from_parts)(found, base, output, constants)
    return [*(const_node(name, value) for name, value in constants.items()), *nodes], constants


def _normalized_from_centred(found: _Found, base: str, output: str, constants: dict[str, np.ndarray]) -> list[Node]:
    """centred x inverse, then gamma and beta: a per-channel affine map (a depthwise conv)."""
    float32 = {"T": {"type": "float32"}}
    affine = found.gamma is not None or found.beta is not None  # the last node is `output`
    nodes = [Node(f"{base}/normalized" if affine else output, "Mul", [f"{base}/centred", f"{base}/inverse"], dict(float32))]
    tail = f"{base}/normalized"
    if found.gamma is not None:
        constants[f"{base}/gamma"] = np.broadcast_to(found.gamma, (found.channels,)).astype(np.float32)
        name = f"{base}/scaled" if found.beta is not None else output
        nodes.append(Node(name, "Mul", [tail, f"{base}/gamma"], dict(float32)))
        tail = name
    if found.beta is not None:
        constants[f"{base}/beta"] = np.broadcast_to(found.beta, (found.channels,)).astype(np.float32)
        nodes.append(Node(output, "AddV2", [tail, f"{base}/beta"], dict(float32)))
    return nodes


def _normalized_from_parts(found: _Found, base: str, output: str, constants: dict[str, np.ndarray]) -> list[Node]:
    """x x w + (-mean(x) x w + beta), w the inverse (times gamma, by a 1x1 conv from one channel to C): the centred values
    are not quantized once more on their way to the output (the variance reads them), as TFLite's converter computes it."""
    float32 = {"T": {"type": "float32"}}
    nodes, factor = [], f"{base}/inverse"
    if found.gamma is not None:
        constants[f"{base}/gamma"] = np.broadcast_to(found.gamma, (found.channels,)).reshape(1, 1, 1, found.channels).astype(np.float32)
        nodes.append(Node(f"{base}/inverse_scaled", "Conv2D", [factor, f"{base}/gamma"], dict(_CONV_ATTRS)))
        factor = f"{base}/inverse_scaled"
    nodes += [Node(f"{base}/scaled_input", "Mul", [found.source, factor], dict(float32)),
              Node(f"{base}/scaled_mean", "Mul", [f"{base}/negated_mean", factor], dict(float32))]
    offset = f"{base}/scaled_mean"
    if found.beta is not None:
        constants[f"{base}/beta"] = np.broadcast_to(found.beta, (found.channels,)).astype(np.float32)
        nodes.append(Node(f"{base}/offset", "AddV2", [offset, f"{base}/beta"], dict(float32)))
        offset = f"{base}/offset"
    return nodes + [Node(output, "AddV2", [f"{base}/scaled_input", offset], dict(float32))]


STATISTICS_OPS = ("Add", "AddV2", "Sub", "Mul", "RealDiv", "Rsqrt", "Sqrt", "Neg", "Maximum")


def _channel_means(graph: Graph, by_name: dict[str, Node]) -> list[Node]:
    """The Means over the last axis without keep_dims."""
    found = []
    for node in graph.nodes:
        axes = _constant(graph, node.inputs[1]) if node.op == "Mean" and not node.attr("keep_dims", False) else None
        shape = graph.shape(node.inputs[0]) if axes is not None else None
        if shape is not None and len(shape) >= 2 and [int(a) % len(shape) for a in axes.reshape(-1)] == [len(shape) - 1]:
            found.append(node)
    return found


def _statistics(graph: Graph, readers, means: list[Node]) -> list[tuple[list[Node], list[Node]]]:
    """Each group of channel Means computed on together (element-wise, with constants of one value) whose values meet
    anything else only through a Reshape giving them their channel axis back: (its Means, those Reshapes)."""
    region = {mean.name for mean in means}
    group = {name: name for name in region}  # union-find: a node -> a node of its group

    def root(name: str) -> str:
        while group[name] != name:
            name = group[name]
        return name

    for node in graph.nodes:
        inputs = [tensor_node(t) for t in node.inputs if _constant(graph, t) is None or _constant(graph, t).size != 1]
        if node.op in STATISTICS_OPS and inputs and all(name in region for name in inputs):
            region.add(node.name)
            group[node.name] = node.name
            for name in inputs:
                group[root(name)] = node.name
    exits: dict[str, list[Node]] = {}
    spoiled = set()
    for name in region:
        kept = graph.shape(f"{name}:0")
        for reader, _ in readers.get(f"{name}:0", []):
            if reader.name in region:
                continue
            shape = graph.shape(f"{reader.name}:0")
            if reader.op == "Reshape" and shape is not None and kept is not None and list(shape) == [*kept, 1]:
                exits.setdefault(root(name), []).append(reader)
            else:
                spoiled.add(root(name))
    return [([mean for mean in means if root(mean.name) == key], exits.get(key, []))
            for key in {root(mean.name) for mean in means} - spoiled]


def kept_statistics(graph: Graph, by_name: dict[str, Node]):
    """A canonicalize rewrite, before signals_as_images: a LayerNorm's statistics as LiteRT's converter writes them, each
    a Mean over the channels without keep_dims ([N, L]), computed on element-wise, and Reshaped to [N, L, 1] where they
    meet x: the Means keep their dims and the Reshapes go, so the moments are Keras' (layer_normalization takes them)."""
    readers = readers_of(graph)
    replacements: dict[str, list[Node]] = {}
    notes = []
    for means, exits in _statistics(graph, readers, _channel_means(graph, by_name)):
        for mean in means:
            replacements[mean.name] = [copy_node(mean, attrs={**mean.attrs, "keep_dims": {"b": True}})]
        for reshape in exits:
            for reader, position in readers.get(f"{reshape.name}:0", []):
                rewired = replacements.get(reader.name, [copy_node(reader)])[-1]
                rewired.inputs[position] = reshape.inputs[0]
                replacements[reader.name] = [rewired]
            replacements[reshape.name] = []
        notes.append(f"{', '.join(mean.name for mean in means)}: Means over the channels without keep_dims, and {len(exits)} "
                     "Reshape(s) giving their values the channel axis back, kept")
    return replacements, {}, notes


def layer_normalization(graph: Graph, by_name: dict[str, Node]):
    """A canonicalize rewrite (canonicalize.py): each Keras LayerNormalization over the channels as the layers above."""
    replacements, constants, notes = {}, {}, []
    readers = readers_of(graph)
    for node in graph.nodes:
        found = _match(graph, by_name, readers, node) if node.op in ("Rsqrt", "Sqrt") else None
        if found is None or found.nodes & set(replacements):
            continue
        nodes, new_constants = _rewritten(found)
        constants.update(new_constants)
        replacements.update({name: [] for name in found.nodes | (found.linear.names if found.linear else set())})
        replacements[found.output.name] = nodes
        centring = "the centring folded into the conv before" if found.linear else "a centring conv"
        notes.append(f"{found.output.name}: LayerNormalization over {found.channels} channels -> {centring}, square, variance "
                     "conv, Rsqrt, product, per-channel affine")
    return replacements, constants, notes
