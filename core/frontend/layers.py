"""The folded graph seen as IR layers: which nodes execute together, and which
tensors the hardware holds in int8 (and so must be calibrated).

A QAT graph is first seen as the float graph it contains: `bypass_fake_quant`
removes its FakeQuant nodes and keeps their ranges, keyed by the tensor each
one quantized, so calibration methods compare on the same float model and the
`qat` method can read the graph's own ranges.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from core.frontend.graph import Graph, GraphError, canonical_tensor, tensor_node
from core.ir.ops import IR_OPS, GraphIndex, Layer, QKind

FAKE_QUANT_OPS = ("FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxArgs")
# nodes a layer never owns: they carry values, not computation
PASSIVE_OPS = ("Const", "Placeholder")


@dataclass(frozen=True)
class QuantRange:
    """A FakeQuant's range: min, max, bits, narrow_range."""

    min: float
    max: float
    num_bits: int = 8
    narrow_range: bool = False


def bypass_fake_quant(graph: Graph) -> tuple[Graph, dict[str, QuantRange]]:
    """(the float graph, tensor -> range of the FakeQuant that read it)."""
    by_name = graph.by_name()
    replaced: dict[str, str] = {}  # FakeQuant output -> the tensor it quantized
    ranges: dict[str, QuantRange] = {}
    for node in graph.nodes:
        if node.op not in FAKE_QUANT_OPS:
            continue
        source = _follow(replaced, canonical_tensor(node.inputs[0]))
        replaced[f"{node.name}:0"] = source
        ranges[source] = _fake_quant_range(graph, by_name, node)
    if not replaced:
        return graph, {}
    nodes = [
        dataclasses.replace(node, inputs=[_follow(replaced, canonical_tensor(t)) for t in node.inputs])
        for node in graph.nodes
        if node.op not in FAKE_QUANT_OPS
    ]
    float_graph = Graph(
        nodes,
        dict(graph.constants),
        graph.input_tensor,
        [_follow(replaced, tensor) for tensor in graph.end_points],
        {**graph.source, "fake_quant_bypassed": True},
    )
    return _drop_unread(float_graph), ranges


def _follow(replaced: dict[str, str], tensor: str) -> str:
    while tensor in replaced:
        tensor = replaced[tensor]
    return tensor


def _fake_quant_range(graph: Graph, by_name, node) -> QuantRange:
    if node.op == "FakeQuantWithMinMaxArgs":
        low, high = node.attr("min"), node.attr("max")
    else:
        low, high = (_scalar_const(graph, by_name, node, tensor) for tensor in node.inputs[1:3])
    return QuantRange(float(low), float(high), int(node.attr("num_bits", 8)), bool(node.attr("narrow_range", False)))


def _scalar_const(graph: Graph, by_name, node, tensor: str) -> float:
    producer = by_name[tensor_node(tensor)]
    if producer.op != "Const":
        raise GraphError(f"{node.name}: its range input {tensor} is not a constant (a frozen graph is expected)")
    return float(graph.constants[producer.name].reshape(-1)[0])


def _drop_unread(graph: Graph) -> Graph:
    """Remove Consts nobody reads any more (the FakeQuant min/max)."""
    read = {tensor_node(tensor) for node in graph.nodes for tensor in node.inputs}
    read |= {tensor_node(graph.input_tensor)} | {tensor_node(t) for t in graph.end_points}
    nodes = [node for node in graph.nodes if node.op != "Const" or node.name in read]
    constants = {name: value for name, value in graph.constants.items() if name in read}
    return Graph(nodes, constants, graph.input_tensor, graph.end_points, graph.source)


@dataclass
class LayerGraph:
    graph: Graph  # the float graph the layers partition
    layers: list[Layer]  # in execution order

    def producer_of(self, tensor: str) -> Layer | None:
        for layer in self.layers:
            if layer.output == tensor:
                return layer
        return None

    def quantized_tensors(self) -> list[str]:
        """The tensors held in int8: the network input and every layer output that
        has a scale of its own (an IDENTITY op such as reshape shares its input's)."""
        tensors = [self.graph.input_tensor]
        for layer in self.layers:
            if IR_OPS[layer.op].annotate.output is not QKind.IDENTITY:
                tensors.append(layer.output)
        return tensors

    def scale_source(self, tensor: str) -> str:
        """The quantized tensor whose scale `tensor` carries (through identity-like layers)."""
        layer = self.producer_of(tensor)
        while layer is not None and IR_OPS[layer.op].annotate.output is QKind.IDENTITY:
            tensor = layer.inputs[0]
            layer = self.producer_of(tensor)
        return tensor


def group_layers(graph: Graph) -> LayerGraph:
    """Partition a folded, FakeQuant-free graph into IR layers; every computing node
    must belong to exactly one, or the graph is not expressible in the IR."""
    index = GraphIndex(graph)
    owner: dict[str, str] = {}
    layers: list[Layer] = []
    for node in graph.nodes:
        if node.name in owner or node.op in PASSIVE_OPS:
            continue
        ir_op = _ir_op_for(graph, node, index)
        layer = ir_op.match(graph, node, index)
        layer.inputs = [canonical_tensor(tensor) for tensor in layer.inputs]
        for name in layer.nodes:
            if name in owner:
                raise GraphError(f"node {name} belongs to both layer {owner[name]} and layer {layer.name}")
            owner[name] = layer.name
        layers.append(layer)
    return LayerGraph(graph, layers)


def _ir_op_for(graph: Graph, node, index: GraphIndex):
    for ir_op in IR_OPS.values():
        if node.op in ir_op.tf_ops and ir_op.applies(graph, node, index):
            return ir_op
    supported = sorted({op for ir_op in IR_OPS.values() for op in ir_op.tf_ops})
    raise GraphError(
        f"node {node.name} ({node.op}) is not part of any IR layer; the IR expresses "
        f"{', '.join(sorted(IR_OPS))} (from TensorFlow ops {', '.join(supported)}), "
        f"with BiasAdd and Relu6 fused into the conv or add before them"
    )
