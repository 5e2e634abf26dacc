"""BatchNorm folding (IR spec, section 3), after constant folding (constant_folding.py).

The IR has no BatchNorm layer: every conv (and dense layer) carries its normalization in
its weights and bias. Two kinds of graph reach this module:

- QAT graphs, where training already folded BatchNorm into constant arithmetic
  (`BatchNorm_Fold/...` feeding `mul_fold` and the bias FakeQuant). Evaluating
  that arithmetic (`fold_constants`) is all they need, plus rewriting their
  `add_fold` Add into a BiasAdd so that every conv block looks the same.
- float graphs, with FusedBatchNorm ops (TF1) or the Mul + Add that Keras 3's
  BatchNormalization freezes to. `fold_batch_norms` moves their per-channel
  scale into the conv weights and their offset into one BiasAdd.

Every function returns a new Graph and leaves its argument untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.frontend.fake_quant import FAKE_QUANT_OPS
from core.frontend.graph import Graph, Node, canonical_tensor, input_feed, tensor_index, tensor_node
from core.frontend.rewrite import const_node, copy_node, evaluate, finish, readers_of, unique_name
from core.frontend.softmax_beta import softmax_beta

CONV_OPS = frozenset({"Conv2D", "DepthwiseConv2dNative"})
# what a BatchNorm folds into: a conv, or a Dense layer's MatMul (weights [K, N], output channels last)
WEIGHTED_OPS = CONV_OPS | {"MatMul"}
FUSED_BATCH_NORM_OPS = frozenset({"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"})
ADD_OPS = frozenset({"Add", "AddV2"})


@dataclass
class FoldResult:
    graph: Graph
    # {"batch_norm": name, "conv": name, "ops": [names of the removed affine ops]}
    folded: list[dict] = field(default_factory=list)
    # {"name", "op", "conv" (or None), "reason"}: what is still there after folding, and why
    unfolded: list[dict] = field(default_factory=list)
    # {"name", "conv"}: conv + bias Adds made BiasAdds without any BatchNorm to fold: the QAT
    # `add_fold` Add(conv, FakeQuant(bias)) (same name, same inputs) and float Add(conv, Const)
    bias_adds: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class _Affine:
    """y = conv * scale + offset, per output channel, accumulated in float64."""

    scale: np.ndarray
    offset: np.ndarray
    normalizes: bool  # a BN or a Mul is in the chain, so the weights change


@dataclass(frozen=True)
class _Chain:
    conv: Node
    ops: list[Node]  # the affine ops after the conv, in order; the last one's name survives
    affine: _Affine
    # the weights are FakeQuant(Const) and a BatchNorm scales them (tfmot's layout): the folded
    # weights start from the fake-quantized values and leave the trained grid
    quantized_weights: bool = False


def _conv_channels(graph: Graph, by_name: dict[str, Node], conv: Node) -> int | None:
    weights = _weights_array(graph, conv)
    if weights is None:  # QAT: the weights are FakeQuant(Const); the Const has the shape
        producer = by_name.get(tensor_node(conv.inputs[1]))
        if producer is not None and producer.op in FAKE_QUANT_OPS:
            weights = graph.constants.get(tensor_node(producer.inputs[0]))
    if weights is not None and weights.ndim == 4:
        return int(weights.shape[3] if conv.op == "Conv2D" else weights.shape[2] * weights.shape[3])
    if weights is not None and weights.ndim == 2 and conv.op == "MatMul":
        return int(weights.shape[1])
    shape = conv.output_shapes[0] if conv.output_shapes else None
    return shape[-1] if shape and shape[-1] > 0 else None


def _weights_array(graph: Graph, conv: Node) -> np.ndarray | None:
    """The conv's weights when they are a plain Const, else None (e.g. FakeQuant(Const))."""
    return graph.constants.get(tensor_node(conv.inputs[1])) if tensor_index(conv.inputs[1]) == 0 else None


def _channel_vector(graph: Graph, tensor: str, channels: int) -> np.ndarray | None:
    """A Const that broadcasts along the last (channel) axis only, as a float64 [C] vector."""
    value = graph.constants.get(tensor_node(tensor))
    if value is None or tensor_index(tensor) != 0 or value.dtype.kind != "f" or value.ndim > 4:
        return None
    if any(dim != 1 for dim in value.shape[:-1]) or (value.ndim and value.shape[-1] not in (1, channels)):
        return None
    return np.broadcast_to(value.astype(np.float64).reshape(-1), (channels,)).copy()


def _other_input(node: Node, tensor: str) -> tuple[str, int] | None:
    """The binary op's other operand and which side `tensor` is on."""
    inputs = [canonical_tensor(t) for t in node.inputs]
    if len(inputs) != 2 or inputs.count(tensor) != 1:
        return None
    position = inputs.index(tensor)
    return inputs[1 - position], position


# Each step rule: (graph, node reading `tensor`, tensor, affine so far, channels) -> new affine or None.
def _step_bias_add(graph, node, tensor, affine, channels):
    if node.op != "BiasAdd" or canonical_tensor(node.inputs[0]) != tensor or node.attr("data_format", "NHWC") != "NHWC":
        return None
    bias = _channel_vector(graph, node.inputs[1], channels)
    return None if bias is None else _Affine(affine.scale, affine.offset + bias, affine.normalizes)


def _step_add(graph, node, tensor, affine, channels):
    other = _other_input(node, tensor) if node.op in ADD_OPS else None
    bias = other and _channel_vector(graph, other[0], channels)
    return None if bias is None else _Affine(affine.scale, affine.offset + bias, affine.normalizes)


def _step_sub(graph, node, tensor, affine, channels):
    other = _other_input(node, tensor) if node.op == "Sub" else None
    value = other and _channel_vector(graph, other[0], channels)
    if value is None:
        return None
    if other[1] == 0:  # x - c
        return _Affine(affine.scale, affine.offset - value, affine.normalizes)
    return _Affine(-affine.scale, value - affine.offset, True)  # c - x flips the sign of the weights


def _step_mul(graph, node, tensor, affine, channels):
    other = _other_input(node, tensor) if node.op in ("Mul", "RealDiv") else None
    if other and node.op == "RealDiv" and other[1] == 1:
        return None  # c / x (the chain's tensor the divisor) is no affine map
    factor = other and _channel_vector(graph, other[0], channels)
    if factor is not None and node.op == "RealDiv":
        factor = 1.0 / factor  # x / c (Keras' Normalization divides by the standard deviation)
    return None if factor is None else _Affine(affine.scale * factor, affine.offset * factor, True)


def _step_fused_batch_norm(graph, node, tensor, affine, channels):
    if node.op not in FUSED_BATCH_NORM_OPS or canonical_tensor(node.inputs[0]) != tensor:
        return None
    if _fused_batch_norm_problem(graph, node) is not None:
        return None
    gamma, beta, mean, variance = (_channel_vector(graph, t, channels) for t in node.inputs[1:5])
    if any(v is None for v in (gamma, beta, mean, variance)):
        return None
    scale = gamma / np.sqrt(variance + float(node.attr("epsilon", 1e-4)))
    return _Affine(affine.scale * scale, (affine.offset - mean) * scale + beta, True)


_STEPS = (_step_bias_add, _step_add, _step_sub, _step_mul, _step_fused_batch_norm)


def _fused_batch_norm_problem(graph: Graph, node: Node) -> str | None:
    """Why this FusedBatchNorm is not an inference-time per-channel affine map, or None."""
    if node.attr("is_training", True):  # the op's default is True, so a missing attr means training
        return "is_training is true: it normalizes with batch statistics, not the constant moving averages"
    if node.attr("data_format", "NHWC") != "NHWC":
        return f"data_format {node.attr('data_format')} is not supported; only NHWC folds into conv weights"
    if node.attr("T", "float32") != "float32":
        return f"dtype {node.attr('T')} is not supported; only float32 folds"
    variable = [t for t in node.inputs[1:5] if tensor_node(t) not in graph.constants]
    if variable:
        return f"its scale/offset/mean/variance inputs are not all constants ({', '.join(variable)})"
    readers = readers_of(graph)
    statistics = [t for t in readers if tensor_node(t) == node.name and tensor_index(t) > 0]
    if statistics or any(tensor_node(t) == node.name and tensor_index(t) > 0 for t in graph.end_points):
        return "its batch-statistics outputs (1..5) are read, so the op cannot be removed"
    return None


def _sole_reader(graph: Graph, readers: dict, tensor: str) -> Node | None:
    """The one node reading `tensor`; None when shared, unread, or an end point (its value must stay)."""
    if tensor in {canonical_tensor(t) for t in graph.end_points}:
        return None
    reading = readers.get(tensor, [])
    if len(reading) != 1:
        return None
    return reading[0][0]


def _match_chain(graph: Graph, by_name: dict[str, Node], readers: dict, conv: Node) -> _Chain | None:
    """The longest run of single-reader per-channel affine ops after `conv`."""
    if conv.attr("data_format", "NHWC") != "NHWC" or len(conv.inputs) != 2:
        return None
    if conv.op == "MatMul" and (conv.attr("transpose_a", False) or conv.attr("transpose_b", False)):
        return None  # the output channels are the weights' last axis only without transposes
    channels = _conv_channels(graph, by_name, conv)
    if channels is None:
        return None
    affine = _Affine(np.ones(channels), np.zeros(channels), False)
    ops: list[Node] = []
    tensor = f"{conv.name}:0"
    while (node := _sole_reader(graph, readers, tensor)) is not None:
        if softmax_beta(graph, node, _sole_reader(graph, readers, f"{node.name}:0")) is not None:
            break  # the softmax's own (softmax_beta.py)
        step = next((new for rule in _STEPS if (new := rule(graph, node, tensor, affine, channels)) is not None), None)
        if step is None:
            break
        affine, tensor = step, f"{node.name}:0"
        ops.append(node)
    if not ops or (len(ops) == 1 and ops[0].op == "BiasAdd" and not affine.normalizes):
        return None  # nothing after the conv, or already canonical
    quantized = _fake_quantized_weights(by_name, conv) is not None
    if affine.normalizes and _weights_array(graph, conv) is None and not quantized:
        return None  # weights computed at run time: nothing to scale
    return _Chain(conv, ops, affine, quantized_weights=affine.normalizes and quantized)


def _fake_quantized_weights(by_name: dict[str, Node], conv: Node) -> Node | None:
    """The FakeQuant the conv's weights come out of, when they are FakeQuant(Const)."""
    producer = by_name.get(tensor_node(conv.inputs[1]))
    if producer is None or producer.op not in FAKE_QUANT_OPS or tensor_index(conv.inputs[1]) != 0:
        return None
    source = by_name.get(tensor_node(producer.inputs[0]))
    return producer if source is not None and source.op == "Const" else None


def _scaled_weights(conv: Node, weights: np.ndarray, scale: np.ndarray) -> np.ndarray:
    if conv.op == "DepthwiseConv2dNative":
        # depthwise output channel c*M + m comes from weights[..., c, m]
        scale = scale.reshape(weights.shape[2], weights.shape[3])
    return (weights.astype(np.float64) * scale).astype(weights.dtype)


def _bias_add_node(name: str, value_input: str, bias_input: str, dtype: str) -> Node:
    return Node(name, "BiasAdd", [value_input, bias_input], {"T": {"type": dtype}, "data_format": {"s": "NHWC"}}, [])


def _rewrite_chain(graph: Graph, chain: _Chain, readers: dict, taken: set[str],
                   quantized_values: dict[str, np.ndarray]) -> tuple[dict[str, list[Node]], dict[str, np.ndarray]]:
    """Replacement nodes keyed by the node they stand in for, plus the new constants.
    `quantized_values`: the value of each FakeQuant(Const) weight tensor."""
    conv, last = chain.conv, chain.ops[-1]
    dtype = conv.attr("T", "float32")
    replacements: dict[str, list[Node]] = {op.name: [] for op in chain.ops}
    constants: dict[str, np.ndarray] = {}

    weights_input = conv.inputs[1]
    if chain.affine.normalizes:
        weights_name = tensor_node(weights_input)
        if chain.quantized_weights or len(readers.get(canonical_tensor(weights_input), [])) != 1:
            # shared weights: leave the other reader's intact; a FakeQuant's: a Const of its own
            weights_name = unique_name(f"{conv.name}/folded_weights", taken)
        values = quantized_values[canonical_tensor(weights_input)] if chain.quantized_weights else graph.constants[tensor_node(weights_input)]
        weights = _scaled_weights(conv, values, chain.affine.scale)
        constants[weights_name] = weights
        replacements[conv.name] = [const_node(weights_name, weights), copy_node(conv, inputs=[conv.inputs[0], weights_name])]
        if weights_name == tensor_node(weights_input):
            replacements[weights_name] = []  # re-emitted just before the conv

    bias_name = unique_name(f"{last.name}/folded_bias", taken)
    bias = chain.affine.offset.astype(np.dtype(dtype))
    constants[bias_name] = bias
    # the BiasAdd takes the last op's name so its readers (and end points) need no change
    replacements[last.name] = [const_node(bias_name, bias), _bias_add_node(last.name, conv.name, bias_name, dtype)]
    return replacements, constants


def _batch_norm_name(chain: _Chain) -> str:
    """The node that stood for the BatchNorm: the FusedBatchNorm, else the last op (Keras' add_1)."""
    fused = [op.name for op in chain.ops if op.op in FUSED_BATCH_NORM_OPS]
    return fused[0] if fused else chain.ops[-1].name


def _fold_float_chains(graph: Graph) -> tuple[list[Node], dict[str, np.ndarray], list[dict], list[dict]]:
    """The rewritten nodes (not yet pruned), their constants, the folded BNs and the plain bias rewrites."""
    by_name, readers = graph.by_name(), readers_of(graph)
    chains = [chain for node in graph.nodes if node.op in WEIGHTED_OPS and (chain := _match_chain(graph, by_name, readers, node))]
    taken = {node.name for node in graph.nodes}
    replacements: dict[str, list[Node]] = {}
    constants = dict(graph.constants)
    fake_quantized = [canonical_tensor(chain.conv.inputs[1]) for chain in chains if chain.quantized_weights]
    quantized_values = dict(zip(fake_quantized, evaluate(graph, fake_quantized))) if fake_quantized else {}
    for chain in chains:
        nodes, new_constants = _rewrite_chain(graph, chain, readers, taken, quantized_values)
        replacements.update(nodes)
        constants.update(new_constants)
    nodes = [new for node in graph.nodes for new in replacements.get(node.name, [copy_node(node)])]
    folded = [
        {"batch_norm": _batch_norm_name(chain), "conv": chain.conv.name, "ops": [op.name for op in chain.ops],
         **({"requantized_weights": tensor_node(chain.conv.inputs[1])} if chain.quantized_weights else {})}
        for chain in chains
        if chain.affine.normalizes
    ]
    bias_adds = [{"name": chain.ops[-1].name, "conv": chain.conv.name} for chain in chains if not chain.affine.normalizes]
    return nodes, constants, folded, bias_adds


def _quantized_bias_operand(graph: Graph, by_name: dict[str, Node], node: Node) -> tuple[Node, str] | None:
    """(conv, bias tensor) when `node` is Add(conv, FakeQuant(Const [C])) in either order."""
    if node.op not in ADD_OPS or len(node.inputs) != 2:
        return None
    for conv_tensor, bias_tensor in (node.inputs, node.inputs[::-1]):
        conv, fake_quant = by_name.get(tensor_node(conv_tensor)), by_name.get(tensor_node(bias_tensor))
        if conv is None or conv.op not in CONV_OPS or tensor_index(conv_tensor) != 0 or conv.attr("data_format", "NHWC") != "NHWC":
            continue
        if fake_quant is None or fake_quant.op not in FAKE_QUANT_OPS or tensor_index(bias_tensor) != 0:
            continue
        bias = graph.constants.get(tensor_node(fake_quant.inputs[0]))
        if bias is not None and bias.ndim == 1 and bias.shape[0] == _conv_channels(graph, by_name, conv):
            return conv, bias_tensor
    return None


def _rewrite_quantized_bias_adds(graph: Graph) -> tuple[Graph, list[dict]]:
    """QAT `add_fold` = Add(conv, FakeQuant(bias)) -> BiasAdd: the same sum, the canonical op."""
    by_name = graph.by_name()
    nodes: list[Node] = []
    rewritten: list[dict] = []
    for node in graph.nodes:
        match = _quantized_bias_operand(graph, by_name, node)
        if match is None:
            nodes.append(copy_node(node))
            continue
        conv, bias_tensor = match
        bias_add = _bias_add_node(node.name, conv.name, bias_tensor, node.attr("T", "float32"))
        nodes.append(copy_node(bias_add, output_shapes=[list(s) if s else s for s in node.output_shapes]))
        rewritten.append({"name": node.name, "conv": conv.name})
    if not rewritten:
        return graph, []
    return Graph(nodes, dict(graph.constants), list(graph.input_tensors), list(graph.end_points), dict(graph.source)), rewritten


def fold_batch_norms(graph: Graph) -> FoldResult:
    """Fold every BatchNorm that follows a conv into the conv; list the ones that cannot be folded.

    Run `fold_constants` first: the patterns expect BatchNorm parameters (and
    Keras' Rsqrt arithmetic) to be Consts already.
    """
    canonical, quantized_bias_adds = _rewrite_quantized_bias_adds(graph)
    nodes, constants, folded, float_bias_adds = _fold_float_chains(canonical)
    result = finish(graph, nodes, constants)
    unfolded = [dict(item, reason=_why_not_folded(result, item)) for item in find_batch_norms(result)]
    return FoldResult(result, folded, unfolded, quantized_bias_adds + float_bias_adds)


# --- what is left: the strict-mode report -----------------------------------------
def _conv_before(graph: Graph, by_name: dict[str, Node], tensor: str) -> tuple[Node | None, list[str]]:
    """Walk back through per-channel bias/scale ops to a conv or MatMul; also the tensors on the way."""
    path: list[str] = []
    seen: set[str] = set()
    while (node := by_name.get(tensor_node(tensor))) is not None and node.name not in seen:
        seen.add(node.name)
        path.append(canonical_tensor(tensor))
        if node.op in WEIGHTED_OPS:
            return node, path
        variable = [t for t in node.inputs if tensor_node(t) not in graph.constants]
        if node.op not in ({"BiasAdd", "Mul", "Sub"} | ADD_OPS) or len(variable) != 1:
            return None, path
        tensor = variable[0]
    return None, path


def _is_batch_norm_like_mul(graph: Graph, readers: dict, node: Node) -> bool:
    """Mul(x, per-channel Const) whose only reader adds or subtracts a per-channel Const."""
    if node.op != "Mul":
        return False
    constant = [t for t in node.inputs if tensor_node(t) in graph.constants]
    if len(constant) != 1 or graph.constants[tensor_node(constant[0])].ndim > 4:
        return False
    reading = readers.get(f"{node.name}:0", [])
    if len(reading) != 1 or reading[0][0].op not in ADD_OPS | {"Sub"}:
        return False
    return any(tensor_node(t) in graph.constants for t in reading[0][0].inputs)


def find_batch_norms(graph: Graph) -> list[dict]:
    """Every FusedBatchNorm*, and every BN-like Mul + Add after a conv, still in the graph."""
    by_name = graph.by_name()
    readers = readers_of(graph)
    found: list[dict] = []
    for node in graph.nodes:
        if node.op in FUSED_BATCH_NORM_OPS:
            conv, _ = _conv_before(graph, by_name, node.inputs[0])
            found.append({"name": node.name, "op": node.op, "conv": conv.name if conv else None})
        elif _is_batch_norm_like_mul(graph, readers, node):
            variable = [t for t in node.inputs if tensor_node(t) not in graph.constants]
            conv, _ = _conv_before(graph, by_name, variable[0])
            if conv is not None:
                add = readers[f"{node.name}:0"][0][0]
                found.append({"name": node.name, "op": f"Mul+{add.op}", "conv": conv.name, "add": add.name})
    return found


def _why_not_folded(graph: Graph, item: dict) -> str:
    node = graph.node(item["name"])
    if node.op in FUSED_BATCH_NORM_OPS and (problem := _fused_batch_norm_problem(graph, node)) is not None:
        return problem
    by_name = graph.by_name()
    data_input = node.inputs[0] if node.op in FUSED_BATCH_NORM_OPS else next(t for t in node.inputs if tensor_node(t) not in graph.constants)
    conv, path = _conv_before(graph, by_name, data_input)
    if conv is None:
        producer = by_name[tensor_node(path[-1])] if path else None
        found = f"{producer.op} {producer.name!r}" if producer else f"{data_input!r}"
        return f"not after a Conv2D/DepthwiseConv2dNative: its input comes from {found}"
    readers = readers_of(graph)
    for tensor in path:
        reading = [reader.name for reader, _ in readers.get(tensor, [])]
        if tensor in {canonical_tensor(t) for t in graph.end_points} or len(reading) > 1:
            return f"{tensor} is also read by {sorted(set(reading) - {item['name']}) or 'the end points'}; changing the conv would change those readers"
    if conv.attr("data_format", "NHWC") != "NHWC":
        return f"conv {conv.name!r} is {conv.attr('data_format')}; only NHWC convs are folded"
    if _weights_array(graph, conv) is None:
        return f"conv {conv.name!r} has non-constant weights ({conv.inputs[1]}), e.g. fake-quantized; scaling them would change their quantization"
    return "its parameters are not per-channel constants of the conv's output width"


# --- 3. checking a fold -----------------------------------------------------------
def run_graph(graph: Graph, sample_input: np.ndarray) -> list[np.ndarray]:
    """The end points' values for `sample_input`, computed by TensorFlow."""
    return evaluate(graph, list(graph.end_points), input_feed(sample_input, graph))


def max_abs_difference(original: Graph, folded: Graph, sample_input: np.ndarray) -> dict:
    """Per-end-point and overall max |folded - original|, plus max |original| for relative tolerances."""
    if len(original.end_points) != len(folded.end_points):
        raise ValueError(f"end points differ: {original.end_points} vs {folded.end_points}")
    reference = run_graph(original, sample_input)
    candidate = run_graph(folded, sample_input)
    per_end_point = {
        name: float(np.max(np.abs(ref.astype(np.float64) - got.astype(np.float64)), initial=0.0))
        for name, ref, got in zip(original.end_points, reference, candidate)
    }
    return {
        "per_end_point": per_end_point,
        "max_abs_difference": max(per_end_point.values(), default=0.0),
        "max_abs_reference": max((float(np.max(np.abs(ref), initial=0.0)) for ref in reference), default=0.0),
    }
