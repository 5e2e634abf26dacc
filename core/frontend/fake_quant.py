"""TensorFlow's FakeQuant ops: their names (the one list every stage uses), the range a
FakeQuant node encodes, and the float graph a QAT graph contains.

A QAT graph is first seen as the float graph it contains: `bypass_fake_quant`
removes its FakeQuant nodes and keeps their ranges, keyed by the tensor each
one quantized, so calibration methods compare on the same float model and the
`qat` method can read the graph's own ranges.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from core.frontend.graph import Graph, GraphError, Node, canonical_tensor, tensor_node

FAKE_QUANT = "FakeQuantWithMinMaxVars"
FAKE_QUANT_ARGS = "FakeQuantWithMinMaxArgs"
FAKE_QUANT_PER_CHANNEL = "FakeQuantWithMinMaxVarsPerChannel"
FAKE_QUANT_OPS = frozenset({FAKE_QUANT, FAKE_QUANT_ARGS, FAKE_QUANT_PER_CHANNEL})
# Graph.source key: FakeQuant node name -> {"scale": [...], "zero_point": [...]}, the exact parameters a
# pre-quantized format stored (a .tflite's float32 scales), which its float [min, max] only approximates; or
# a constant's name, where no FakeQuant can hold its quantization (TensorFlow's per-channel FakeQuant takes the
# last axis, a depthwise kernel's channels are its last two)
EXACT_PARAMETERS = "fake_quant_parameters"


@dataclass(frozen=True)
class QuantRange:
    """A FakeQuant's range: min, max, bits, narrow_range; a per-channel FakeQuant's ranges per
    channel (along the last axis) too, with min and max over them."""

    min: float
    max: float
    num_bits: int = 8
    narrow_range: bool = False
    channel_min: tuple[float, ...] | None = None
    channel_max: tuple[float, ...] | None = None
    # the scale(s) and zero point(s) the model stored, where its format had them: what a scheme that
    # takes scales (tflite_int8) uses instead of deriving them from the float range
    scale: tuple[float, ...] | None = None
    zero_point: tuple[int, ...] | None = None


def bypass_fake_quant(graph: Graph, activations_only: bool = False) -> tuple[Graph, dict[str, QuantRange]]:
    """(the float graph, tensor -> range of the FakeQuant that read it). `activations_only`: the FakeQuants of
    constants (weights, biases) stay, so the graph computes with the trained quantized weights."""
    by_name = graph.by_name()
    replaced: dict[str, str] = {}  # FakeQuant output -> the tensor it quantized
    ranges: dict[str, QuantRange] = {}
    kept: set[str] = set()
    for node in graph.nodes:
        if node.op not in FAKE_QUANT_OPS:
            continue
        if activations_only and tensor_node(node.inputs[0]) in graph.constants:
            kept.add(node.name)
            continue
        source = _follow(replaced, canonical_tensor(node.inputs[0]))
        replaced[f"{node.name}:0"] = source
        exact = graph.source.get(EXACT_PARAMETERS, {}).get(node.name)
        ranges[source] = _with_exact_parameters(_fake_quant_range(graph, by_name, node), exact)
    ranges.update(_constant_parameters(graph))
    if not replaced:
        return graph, ranges
    nodes = [
        dataclasses.replace(node, inputs=[_follow(replaced, canonical_tensor(t)) for t in node.inputs])
        for node in graph.nodes
        if node.op not in FAKE_QUANT_OPS or node.name in kept
    ]
    float_graph = Graph(
        nodes,
        dict(graph.constants),
        list(graph.input_tensors),
        [_follow(replaced, tensor) for tensor in graph.end_points],
        {**graph.source, "fake_quant_bypassed": True},
    )
    return _drop_unread(float_graph), ranges


def _follow(replaced: dict[str, str], tensor: str) -> str:
    while tensor in replaced:
        tensor = replaced[tensor]
    return tensor


def _constant_parameters(graph: Graph) -> dict[str, QuantRange]:
    """The ranges of the constants whose exact parameters the graph carries without a FakeQuant: symmetric,
    narrow, per channel."""
    ranges = {}
    for name, parameters in graph.source.get(EXACT_PARAMETERS, {}).items():
        if name in graph.constants:
            scales = tuple(float(v) for v in parameters["scale"])
            highs = tuple(127 * scale for scale in scales)
            ranges[f"{name}:0"] = QuantRange(-max(highs), max(highs), 8, True, tuple(-h for h in highs), highs, scales,
                                             tuple(int(v) for v in parameters["zero_point"]))
    return ranges


def _with_exact_parameters(quant_range: QuantRange, parameters: dict | None) -> QuantRange:
    if parameters is None:
        return quant_range
    return dataclasses.replace(quant_range, scale=tuple(float(v) for v in parameters["scale"]),
                               zero_point=tuple(int(v) for v in parameters["zero_point"]))


def _fake_quant_range(graph: Graph, by_name: dict[str, Node], node: Node) -> QuantRange:
    bits, narrow = int(node.attr("num_bits", 8)), bool(node.attr("narrow_range", False))
    if node.op == FAKE_QUANT_ARGS:
        return QuantRange(float(node.attr("min")), float(node.attr("max")), bits, narrow)
    low, high = (_const_values(graph, by_name, node, tensor) for tensor in node.inputs[1:3])
    if node.op == FAKE_QUANT_PER_CHANNEL:
        return QuantRange(float(low.min()), float(high.max()), bits, narrow, tuple(map(float, low)), tuple(map(float, high)))
    return QuantRange(float(low[0]), float(high[0]), bits, narrow)


def _const_values(graph: Graph, by_name: dict[str, Node], node: Node, tensor: str):
    producer = by_name[tensor_node(tensor)]
    if producer.op != "Const":
        raise GraphError(f"{node.name}: its range input {tensor} is not a constant (a frozen graph is expected)")
    return graph.constants[producer.name].reshape(-1).astype(float)


def _drop_unread(graph: Graph) -> Graph:
    """Remove Consts nobody reads any more (the FakeQuant min/max)."""
    read = {tensor_node(tensor) for node in graph.nodes for tensor in node.inputs}
    read |= {tensor_node(t) for t in graph.input_tensors} | {tensor_node(t) for t in graph.end_points}
    nodes = [node for node in graph.nodes if node.op != "Const" or node.name in read]
    constants = {name: value for name, value in graph.constants.items() if name in read}
    return Graph(nodes, constants, list(graph.input_tensors), graph.end_points, graph.source)
