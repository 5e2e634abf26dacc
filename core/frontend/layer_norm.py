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
verifies the rewritten graph against the original on data."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.frontend.graph import Graph, Node, canonical_tensor, tensor_node
from core.frontend.rewrite import const_node, readers_of

_PASS_THROUGH = ("StopGradient", "Identity")
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
    """The tensor `node` averages over its last axis (keep_dims), when it is such a Mean."""
    if node is None or node.op != "Mean" or not node.attr("keep_dims", False):
        return None
    axes, shape = _constant(graph, node.inputs[1]), graph.shape(node.inputs[0])
    if axes is None or shape is None or len(shape) != 4 or [int(a) % 4 for a in axes.reshape(-1)] != [3]:
        return None
    return canonical_tensor(node.inputs[0])


def _other(node: Node, tensor: str) -> str | None:
    """`node`'s input other than `tensor`, when `node` has two inputs and one is `tensor`."""
    inputs = [canonical_tensor(t) for t in node.inputs]
    if len(inputs) != 2 or tensor not in inputs:
        return None
    return inputs[1 - inputs.index(tensor)]


def _match(graph: Graph, by_name: dict[str, Node], readers, rsqrt: Node) -> _Found | None:
    """The LayerNormalization whose Rsqrt is `rsqrt`, or None when the nodes around it are not Keras' form."""
    shifted = by_name.get(tensor_node(rsqrt.inputs[0]))
    if shifted is None or shifted.op not in ("Add", "AddV2"):
        return None
    epsilon = next((_constant(graph, t) for t in shifted.inputs if _constant(graph, t) is not None), None)
    variance = next((by_name.get(tensor_node(t)) for t in shifted.inputs if _constant(graph, t) is None), None)
    difference = by_name.get(tensor_node(variance.inputs[0])) if _last_axis_mean(graph, variance) else None
    if epsilon is None or epsilon.size != 1 or difference is None or difference.op != "SquaredDifference":
        return None
    mean = _through(by_name, difference.inputs[1])
    source = _last_axis_mean(graph, mean)
    if source is None or canonical_tensor(difference.inputs[0]) != source:
        return None
    channels = graph.shape(source)[3]
    # inv, or inv * gamma (scale=True)
    inverse, gamma = f"{rsqrt.name}:0", None
    scaled = [reader for reader, _ in readers.get(inverse, []) if reader.op == "Mul" and _constant(graph, _other(reader, inverse)) is not None]
    if scaled:
        gamma = _constant(graph, _other(scaled[0], inverse)).reshape(-1)
        inverse = f"{scaled[0].name}:0"
    products = {canonical_tensor(factor): reader for reader, _ in readers.get(inverse, [])
                if reader.op == "Mul" and (factor := _other(reader, inverse)) is not None}
    negated = None  # Neg(mean), times the inverse
    for tensor in products:
        producer = by_name.get(tensor_node(tensor))
        if producer is not None and producer.op == "Neg" and _through(by_name, producer.inputs[0]) is mean:
            negated = producer
    if source not in products or negated is None:
        return None
    offset, beta = products[f"{negated.name}:0"], None  # -mean * inv, then + beta (center=True)
    offset_readers = [reader for reader, _ in readers.get(f"{offset.name}:0", [])]
    if len(offset_readers) == 1 and offset_readers[0].op in ("Add", "AddV2") and (
            bias := _constant(graph, _other(offset_readers[0], f"{offset.name}:0"))) is not None:
        beta, offset = bias.reshape(-1), offset_readers[0]
    scaled_input = products[source]
    final = [reader for reader, _ in readers.get(f"{scaled_input.name}:0", []) if reader.op in ("Add", "AddV2")
             and _other(reader, f"{scaled_input.name}:0") == f"{offset.name}:0"]
    if len(final) != 1 or any(v is not None and v.size not in (1, channels) for v in (gamma, beta)):
        return None
    nodes = {shifted.name, variance.name, difference.name, mean.name, rsqrt.name, negated.name, offset.name, scaled_input.name,
             final[0].name, products[f"{negated.name}:0"].name, *(reader.name for reader in scaled)}
    nodes |= {n.name for n in by_name.values() if n.op in _PASS_THROUGH and _through(by_name, f"{n.name}:0") is mean}
    if any(reader.name not in nodes for name in nodes - {final[0].name} for reader, _ in readers.get(f"{name}:0", [])):
        return None  # a moment read elsewhere too: the rewrite would take it away
    return _Found(source, channels, float(epsilon.reshape(-1)[0]), gamma, beta, final[0], nodes,
                  _linear_producer(graph, by_name, readers, source, nodes))


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
    nodes += (_normalized_from_centred if found.linear else _normalized_from_parts)(found, base, constants)
    return [*(const_node(name, value) for name, value in constants.items()), *nodes], constants


def _normalized_from_centred(found: _Found, base: str, constants: dict[str, np.ndarray]) -> list[Node]:
    """centred x inverse, then gamma and beta: a per-channel affine map (a depthwise conv)."""
    float32 = {"T": {"type": "float32"}}
    affine = found.gamma is not None or found.beta is not None  # the last node takes the output's name
    nodes = [Node(f"{base}/normalized" if affine else base, "Mul", [f"{base}/centred", f"{base}/inverse"], dict(float32))]
    tail = f"{base}/normalized"
    if found.gamma is not None:
        constants[f"{base}/gamma"] = np.broadcast_to(found.gamma, (found.channels,)).astype(np.float32)
        name = f"{base}/scaled" if found.beta is not None else base
        nodes.append(Node(name, "Mul", [tail, f"{base}/gamma"], dict(float32)))
        tail = name
    if found.beta is not None:
        constants[f"{base}/beta"] = np.broadcast_to(found.beta, (found.channels,)).astype(np.float32)
        nodes.append(Node(base, "AddV2", [tail, f"{base}/beta"], dict(float32)))
    return nodes


def _normalized_from_parts(found: _Found, base: str, constants: dict[str, np.ndarray]) -> list[Node]:
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
    return nodes + [Node(base, "AddV2", [f"{base}/scaled_input", offset], dict(float32))]


def layer_normalization(graph: Graph, by_name: dict[str, Node]):
    """A canonicalize rewrite (canonicalize.py): each Keras LayerNormalization over the channels as the layers above."""
    replacements, constants, notes = {}, {}, []
    readers = readers_of(graph)
    for node in graph.nodes:
        found = _match(graph, by_name, readers, node) if node.op == "Rsqrt" else None
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
