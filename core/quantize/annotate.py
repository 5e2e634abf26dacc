"""Simulated quantization: the float graph with FakeQuant nodes where the IR quantizes.

This is TVM's QuantizeAnnotate (seed 001) specialised to the TF2IR hardware,
driven by the per-op `AnnotateRule`s of the registry and by the calibration
table, never by op names:

- activations: every IR layer stores its output in int8, so each quantized
  tensor (`LayerGraph.quantized_tensors`: the network input and every layer
  output whose rule is not IDENTITY) gets exactly one FakeQuant right after its
  producer, and all its readers read that. That is TVM's "quantize at
  consumption" (INPUT kind) with its multi-reference sharing: one quantize per
  tensor, however many layers read it. IDENTITY ops (reshape) keep their input's
  int8 values and scale, so nothing is inserted after them.
- weights (rules with `weight`): the Const is wrapped in a FakeQuant, per tensor,
  or per output channel when the entry has `channel_ranges`.
- biases (rules with `bias`): a FakeQuant on the power-of-two target; on a
  float-scale target the int32 bias (scale = input scale * weight scale) is
  rounded to its grid once, in numpy, and stored as a Const.

Node names follow TF2IR's QAT graphs so that an exported graph re-imports, folds
and calibrates (method qat) to the same table:
  activation  <producer node>/act_quant/{FakeQuantWithMinMaxVars,min,max}
  input       <input node>/input_quant/...
  weight      <layer name>/weights_quant/...   (per channel: FakeQuantWithMinMaxVarsPerChannel)
  bias        <layer name>/bias_quant/...      (float-scale grid: <layer name>/bias_quant/quantized)
The Consts being quantized keep their names, so table keys survive a round trip.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from core.quantize.table import CalibrationTable, TensorEntry, corrected
from core.frontend.graph import Graph, GraphError, Node, canonical_tensor, tensor_index, tensor_node
from core.frontend.fake_quant import FAKE_QUANT, FAKE_QUANT_PER_CHANNEL
from core.frontend.layers import Layer, LayerGraph
from core.frontend.rewrite import remove_dead_nodes
from core.quantize.grid import ChannelGrid, power_of_two_log2scale
from core.quantize.integer_model import GraphModelBuilder

BIAS_BITS = 32  # the hardware accumulates and adds biases in int32


class AnnotateError(GraphError):
    """A table and a graph that do not fit together; the message names the tensor."""


@dataclasses.dataclass
class _Insertions:
    """The edit being built: new nodes after existing ones, and input rewiring."""

    graph: Graph
    taken: set[str]
    after: dict[str, list[Node]] = dataclasses.field(default_factory=dict)  # existing node -> nodes right after it
    constants: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    everywhere: dict[str, str] = dataclasses.field(default_factory=dict)  # tensor -> replacement, for every reader
    in_node: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)  # (reader, tensor) -> replacement
    record: dict[str, dict[str, str]] = dataclasses.field(default_factory=lambda: {"activations": {}, "weights": {}, "biases": {}})

    def scope(self, base: str) -> str:
        """`base`, or `base_1`, ... : a prefix no existing node name lives under."""
        scope, counter = base, 1
        while any(name == scope or name.startswith(scope + "/") for name in self.taken):
            scope, counter = f"{base}_{counter}", counter + 1
        return scope

    def add(self, after: str, node: Node, value: np.ndarray | None = None) -> str:
        if node.name in self.taken:
            raise AnnotateError(f"node name {node.name} is already taken")
        self.taken.add(node.name)
        self.after.setdefault(after, []).append(node)
        if value is not None:
            self.constants[node.name] = value
        return f"{node.name}:0"


def _const(name: str, value: np.ndarray) -> tuple[Node, np.ndarray]:
    return Node(name, "Const", [], {"dtype": {"type": value.dtype.name}}), value


def _fake_quant(edit: _Insertions, after: str, scope: str, tensor: str, low, high, bits: int, narrow_range: bool = False) -> str:
    """FakeQuant(tensor) with Const min/max under `scope`; per channel when low/high are vectors;
    `narrow_range`: integers in [-(2^(bits-1) - 1), 2^(bits-1) - 1] (the scheme's weights)."""
    low, high = np.asarray(low, np.float32), np.asarray(high, np.float32)
    op = FAKE_QUANT if low.ndim == 0 else FAKE_QUANT_PER_CHANNEL
    min_tensor = edit.add(after, *_const(f"{scope}/min", low))
    max_tensor = edit.add(after, *_const(f"{scope}/max", high))
    attrs = {"num_bits": {"i": int(bits)}, "narrow_range": {"b": bool(narrow_range)}}
    return edit.add(after, Node(f"{scope}/{op}", op, [tensor, min_tensor, max_tensor], attrs))


def _reshape(edit: _Insertions, after: str, name: str, tensor: str, shape: list[int]) -> str:
    shape_tensor = edit.add(after, *_const(f"{name}/shape", np.asarray(shape, np.int32)))
    attrs = {"T": {"type": "float32"}, "Tshape": {"type": "int32"}}
    return edit.add(after, Node(name, "Reshape", [tensor, shape_tensor], attrs))


# --- activations ------------------------------------------------------------------
def _activation_entries(layer_graph: LayerGraph, table: CalibrationTable, allow_missing: bool) -> list[tuple[str, TensorEntry]]:
    """(tensor, entry) for each quantized tensor that the table covers."""
    found = []
    for tensor in layer_graph.quantized_tensors():
        entry = table.tensors.get(tensor)
        if entry is None:
            # QAT tables have no input entry: the IR receives the input already in int8
            if tensor in layer_graph.graph.input_tensors or allow_missing:
                continue
            raise AnnotateError(f"quantized tensor {tensor} has no entry in the calibration table ({table.method}); re-run calibrate")
        found.append((tensor, entry))
    return found


def _annotate_activation(edit: _Insertions, tensor: str, entry: TensorEntry, is_input: bool, bits: int, reads: str) -> None:
    """One FakeQuant for `tensor`, reading `reads` (the tensor, or its layer's integer model)."""
    if not entry.range:
        raise AnnotateError(f"activation {tensor}: its table entry has no range; activations are quantized per tensor")
    producer = tensor_node(tensor)
    suffix = "input_quant" if is_input else "act_quant"
    if tensor_index(tensor):
        suffix += f"_{tensor_index(tensor)}"
    scope = edit.scope(f"{producer}/{suffix}")
    quantized = _fake_quant(edit, producer, scope, reads, entry.range[0], entry.range[1], bits)
    edit.everywhere[tensor] = quantized
    edit.record["activations"][tensor] = quantized


def _integer_model(edit: _Insertions, layer: Layer | None, layer_graph: LayerGraph, table: CalibrationTable) -> str | None:
    """The output of the layer's integer model, added to the graph, when its rule has one and
    the table is power-of-two (the integers are the IR's); None otherwise."""
    if layer is None or layer.rule.integer_model is None:
        return None
    output_log2scale = power_of_two_log2scale(table.tensors[layer.output].grid)
    if output_log2scale is None:
        return None
    inputs, log2scales = [], []
    for tensor in layer.inputs:
        entry = table.tensors.get(layer_graph.scale_source(tensor))
        log2scale = None if entry is None else power_of_two_log2scale(entry.grid)
        if log2scale is None:
            raise AnnotateError(f"layer {layer.name} ({layer.op}): its input {tensor} has no power-of-two scale in the "
                                f"calibration table ({table.method}); its integer model needs one")
        inputs.append(edit.everywhere.get(tensor, tensor))  # its FakeQuant, or an identity op's output
        log2scales.append(log2scale)
    scope = edit.scope(f"{layer.name}/integer_model")
    builder = GraphModelBuilder(edit, tensor_node(layer.output), scope, layer_graph.graph, layer, inputs, log2scales,
                                output_log2scale)
    return layer.rule.integer_model(builder)


# --- weights and biases -------------------------------------------------------------
def _reader_in_layer(graph: Graph, layer: Layer, tensor: str) -> Node:
    """The layer's node that reads the constant `tensor`."""
    for name in layer.nodes:
        node = graph.node(name)
        if tensor in (canonical_tensor(t) for t in node.inputs):
            return node
    raise AnnotateError(f"layer {layer.name}: none of its nodes reads {tensor}")


def _per_channel(edit: _Insertions, layer: Layer, reader: Node, tensor: str, entry: TensorEntry, scope: str, bits: int) -> str:
    """Per-output-channel FakeQuant; the channel axes are merged into a last axis around it."""
    shape = list(edit.graph.constants[tensor_node(tensor)].shape)
    # a bias is one value per channel; a weight's output channels are the axes its rule names, merged
    # into one last axis around the FakeQuant, which quantizes along the last axis
    axes = (0,) if len(shape) == 1 else tuple(axis % len(shape) for axis in layer.rule.weight_channel_axes)
    if not axes:
        raise AnnotateError(f"layer {layer.name}: per-channel weights of a {reader.op} are not supported (conv and dwconv are)")
    channels = int(np.prod([shape[axis] for axis in axes]))
    ranges = np.asarray(entry.channel_ranges, np.float32)
    if ranges.shape != (channels, 2):
        raise AnnotateError(f"{tensor} of layer {layer.name}: {len(entry.channel_ranges)} channel ranges for {channels} output channels")
    after = tensor_node(tensor)
    if len(axes) == 1:
        return _fake_quant(edit, after, scope, tensor, ranges[:, 0], ranges[:, 1], bits, entry.narrow_range)
    merged = _reshape(edit, after, f"{scope}/Reshape", tensor, shape[: axes[0]] + [channels])
    quantized = _fake_quant(edit, after, scope, merged, ranges[:, 0], ranges[:, 1], bits, entry.narrow_range)
    return _reshape(edit, after, f"{scope}/Reshape_1", quantized, shape)


def _grid_bias(edit: _Insertions, layer: Layer, tensor: str, entry: TensorEntry, scope: str) -> str:
    """The bias rounded to its int32 grid (float-scale target), as a new Const."""
    bias = corrected(entry, edit.graph.constants[tensor_node(tensor)]).astype(np.float64)
    scales = np.asarray(entry.grid.scales, np.float64)
    if scales.size not in (1, bias.size) or not np.all(scales > 0):
        raise AnnotateError(f"bias {tensor} of layer {layer.name}: {scales.size} scale(s) for {bias.size} channels, or a scale <= 0")
    limit = 2.0 ** (BIAS_BITS - 1)
    # floor(x + 0.5): the rounding FakeQuant uses, so both targets round alike
    steps = np.clip(np.floor(bias / scales + 0.5), -limit, limit - 1)
    return edit.add(tensor_node(tensor), *_const(f"{scope}/quantized", (steps * scales).astype(np.float32)))


def _annotate_constant(edit: _Insertions, layer: Layer, const: str, kind: str, table: CalibrationTable) -> None:
    tensor = f"{const}:0"
    entry = table.tensors.get(tensor)
    if entry is None:
        raise AnnotateError(f"{kind} {tensor} of layer {layer.name} has no entry in the calibration table ({table.method}); re-run calibrate")
    reader = _reader_in_layer(edit.graph, layer, tensor)
    scope = edit.scope(f"{layer.name}/{'weights_quant' if kind == 'weight' else 'bias_quant'}")
    if entry.channel_ranges:
        quantized = _per_channel(edit, layer, reader, tensor, entry, scope, table.bits_of(entry))
    elif entry.range:
        # a corrected bias (calib.bias_correction) is quantized from a Const of its own
        source = tensor if entry.correction is None else edit.add(
            const, *_const(f"{scope}/corrected", corrected(entry, edit.graph.constants[const])))
        quantized = _fake_quant(edit, const, scope, source, entry.range[0], entry.range[1], table.bits_of(entry), entry.narrow_range)
    elif kind == "bias" and isinstance(entry.grid, ChannelGrid):
        quantized = _grid_bias(edit, layer, tensor, entry, scope)
    else:
        raise AnnotateError(f"{kind} {tensor} of layer {layer.name}: its table entry has neither a range nor scales")
    edit.in_node[(reader.name, tensor)] = quantized
    edit.record["weights" if kind == "weight" else "biases"][tensor] = quantized


# --- assembling -------------------------------------------------------------------
def _rewired(node: Node, edit: _Insertions, inserted: set[str]) -> Node:
    inputs = []
    for tensor in node.inputs:
        key = canonical_tensor(tensor)
        replacement = edit.in_node.get((node.name, key))
        if replacement is None and node.name not in inserted:  # a FakeQuant reads the tensor it replaces
            replacement = edit.everywhere.get(key)
        inputs.append(replacement or tensor)
    return dataclasses.replace(node, inputs=inputs, attrs={k: dict(v) for k, v in node.attrs.items()}, output_shapes=[])


def _assemble(edit: _Insertions, table: CalibrationTable) -> Graph:
    graph = edit.graph
    inserted = {node.name for nodes in edit.after.values() for node in nodes}
    nodes: list[Node] = []
    for node in graph.nodes:  # each insertion right after what it reads keeps the order topological
        nodes.append(_rewired(node, edit, inserted))
        nodes.extend(_rewired(new, edit, inserted) for new in edit.after.get(node.name, []))
    end_points = [edit.everywhere.get(canonical_tensor(t), t) for t in graph.end_points]
    constants = {**graph.constants, **edit.constants}
    source = {**graph.source, "annotation": {"method": table.method, "target": table.target, "bits": table.bits, **edit.record}}
    # what nothing reads any more goes: a bias replaced by its grid Const, the float ops an integer model replaced
    annotated = remove_dead_nodes(Graph(nodes, constants, list(graph.input_tensors), end_points, source))
    annotated.infer_shapes()
    return annotated


def annotate_graph(layer_graph: LayerGraph, table: CalibrationTable, *, allow_missing: bool = False,
                   integer_models: bool = True) -> Graph:
    """The float graph of `layer_graph` with simulated quantization from `table`.

    Every quantized tensor with an entry is quantized once; a missing entry is an
    error except for the network input (QAT tables leave it out) or with
    `allow_missing` (to quantize only part of a network: activations, weights and biases alike). `source['annotation']`
    maps each quantized tensor, weight and bias to the FakeQuant output replacing it.
    `integer_models`: on a power-of-two table, a layer whose rule has an integer model
    (add, lut, softmax) is computed by it (the IR's integers exactly); without, by its float
    ops (the graph then re-imports as a QAT graph, every op one the IR's patterns know)."""
    graph = layer_graph.graph
    edit = _Insertions(graph, {node.name for node in graph.nodes})
    for tensor, entry in _activation_entries(layer_graph, table, allow_missing):
        model = _integer_model(edit, layer_graph.producer_of(tensor), layer_graph, table) if integer_models else None
        _annotate_activation(edit, tensor, entry, tensor in graph.input_tensors, table.bits, model or tensor)
    float_layers = set(table.float_layers)  # calib.keep_float: weights and biases stay float
    for layer in layer_graph.layers:
        rule = layer.rule
        if layer.name in float_layers:
            continue
        for wanted, const, kind in ((rule.weight, layer.weight, "weight"), (rule.bias, layer.bias, "bias")):
            if wanted and const is not None and not (allow_missing and f"{const}:0" not in table.tensors):
                _annotate_constant(edit, layer, const, kind, table)
    return _assemble(edit, table)


def export_frozen_graph(graph: Graph, path: str | Path) -> Path:
    """Write `graph` as a binary frozen GraphDef (.pb), loadable by `load_graph_def('frozen_graph', path)`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(graph.to_graph_def().SerializeToString(deterministic=True))
    return path
