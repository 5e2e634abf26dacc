"""Target-oriented partitioning of the TF2IR IR (seed 004 [0047]-[0057]).

1. Pattern matching and annotation: every IR layer is already one fused group (a conv layer is
   Q.conv2d + Q.bias_add + Q.requantize + Q.relu6 of seed 004 [0045]); it is annotated "accel"
   when a pattern of the accelerator covers its operation and all the pattern's constraints,
   the accelerator's shift range and its buffers' minimal tile hold, else "host" with the reason.
2. Regions: accelerator layers connected along the graph's edges are merged into regions
   (accelerator functions), numbered in execution order. A merge that would make the graph of
   functions and host layers cyclic (a path leaving a function through the host and coming back)
   is refused, so every function can run as one call.
3. Layout: accelerator layers read and write the blocked accelerator layout, host layers the IR's
   HWC. An island of host element-wise layers (connected add layers on the host) whose inputs
   all come from, and whose outputs all go to, accelerator layers runs on the packed data: seed
   004 [0048]/[0055], "if only element-wise operators lie between two accelerator modules, no
   extra pack and unpack". The network input and the end points are host boundaries: they are
   in the host layout, like the operands of a non-element-wise host operator.
4. Pack/unpack: a tensor in the host layout read by a layer that needs the accelerator layout is
   packed once (one pack point, however many such readers); a tensor in the accelerator layout
   read on the host or leaving the network at an end point is unpacked once. In a chain this is
   exactly [0055]: a pack before the first function when a non-element-wise operator (or the
   network input) precedes it, an unpack after the last when one (or the end) follows it, and
   between two functions a pack/unpack only if a non-element-wise operator lies between them.
   A pack of a tensor of at most one block of channels whose readers all load it as rows of vectors
   is made by the DMA as they read it (narrow loads: `LayoutChange.by_dma`), not by the host.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import networkx as nx

from core.backends.accel.lowering import LoweringError
from core.backends.accel.ops import HOST_ONLY, host_only_errors, lowering_of
from core.backends.accel.target import Accelerator, Pattern
from core.ir.fixedpoint import INT32_MAX
from core.ir.network import Ir
from core.ir.op import END_POINT, is_network_input
from core.ir.records import IrLayer

ACCEL, HOST = "accel", "host"
ACCEL_LAYOUT, HOST_LAYOUT = "accelerator", "host"


@dataclass(frozen=True)
class Group:
    """One IR layer as a fused group, annotated with where it runs."""

    layer: str
    index: int  # execution order
    operation: str
    fused: list[str]  # the quantized operators it stands for (seed 004 [0045])
    target: str  # "accel" or "host"
    pattern: str | None  # the accelerator pattern it matched
    reason: str
    region: str | None  # the accelerator function it belongs to
    layout: str  # the layout it reads and writes: "accelerator" or "host"
    macs: int


@dataclass(frozen=True)
class Region:
    """An accelerator function: its layers in execution order, the tensors it reads from outside
    and those it hands out (read outside or network end points). A tensor is named by the layer
    that produces it ("input": the network input)."""

    name: str
    layers: list[str]
    inputs: list[str]
    outputs: list[str]
    pack: bool  # seed 004 [0056]: (accelerator_func, pack_flag, unpack_flag)
    unpack: bool
    macs: int


@dataclass(frozen=True)
class LayoutChange:
    """A pack (host -> accelerator layout) or unpack (accelerator -> host layout) of one tensor,
    serving the readers listed ("endpoint": the network output)."""

    kind: str
    tensor: str
    readers: list[str]
    shape: list[int]  # host layout (HWC, or a reshape's shape)
    bytes: int  # int8, host layout
    packed_bytes: int  # int8, accelerator layout (channels padded to whole blocks)
    # a pack the accelerator's DMA makes as its readers load the tensor where the host keeps it (narrow loads of a tensor of
    # at most one block of channels, readers that read their inputs as rows of vectors: OpLowering.reads_host_layout): no
    # host copy, no packed copy in memory
    by_dma: bool = False


@dataclass
class PartitionPlan:
    target: str
    accelerator: Accelerator | None
    groups: list[Group]
    regions: list[Region]
    packs: list[LayoutChange]
    unpacks: list[LayoutChange]
    notes: list[str] = field(default_factory=list)

    @property
    def read_in_host_layout(self) -> set[str]:
        """The tensors the accelerator reads where the host keeps them (packs by its DMA)."""
        return {change.tensor for change in self.packs if change.by_dma}

    def group(self, layer: str) -> Group:
        return next(group for group in self.groups if group.layer == layer)

    def metrics(self) -> dict[str, float]:
        macs = sum(group.macs for group in self.groups)
        macs_accel = sum(group.macs for group in self.groups if group.target == ACCEL)
        layers_accel = sum(group.target == ACCEL for group in self.groups)
        changes = self.packs + self.unpacks
        return {
            "layers": len(self.groups),
            "layers_accel": layers_accel,
            "layers_host": len(self.groups) - layers_accel,
            "layer_share_accel": layers_accel / len(self.groups),
            "host_layers_on_packed_data": sum(g.target == HOST and g.layout == ACCEL_LAYOUT for g in self.groups),
            "macs": macs,
            "macs_accel": macs_accel,
            "mac_share_accel": macs_accel / macs if macs else 0.0,
            "regions": len(self.regions),
            "pack_count": len(self.packs),
            "pack_by_dma_count": sum(change.by_dma for change in self.packs),
            "unpack_count": len(self.unpacks),
            "boundary_bytes": sum(change.bytes for change in changes),
            "boundary_packed_bytes": sum(change.packed_bytes for change in changes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], origin: str = "partition plan") -> "PartitionPlan":
        """The plan `to_json` wrote (the partition stage's partition_plan.json)."""
        try:
            accelerator = None if data["accelerator"] is None else Accelerator.from_mapping(data["accelerator"], name=data["target"],
                                                                                            origin=origin)
            return cls(data["target"], accelerator, [Group(**group) for group in data["groups"]],
                       [Region(**region) for region in data["regions"]], [LayoutChange(**change) for change in data["pack"]],
                       [LayoutChange(**change) for change in data["unpack"]], list(data["notes"]))
        except (KeyError, TypeError) as error:
            raise ValueError(f"{origin}: not a partition plan this version wrote ({error}); re-run the partition stage") from None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "accelerator": None if self.accelerator is None else self.accelerator.to_dict(),
            "layouts": {HOST_LAYOUT: ["H", "W", "C"], ACCEL_LAYOUT: None if self.accelerator is None else list(self.accelerator.layout)},
            "groups": [asdict(group) for group in self.groups],
            "regions": [asdict(region) for region in self.regions],
            "pack": [asdict(change) for change in self.packs],
            "unpack": [asdict(change) for change in self.unpacks],
            "notes": list(self.notes),
            "metrics": self.metrics(),
        }


# --- 1. pattern matching and annotation ------------------------------------------------------


def match_layer(layer: IrLayer, accelerator: Accelerator | None, target: str, params: dict | None = None) -> tuple[Pattern | None, str]:
    """(the pattern that runs the layer on the accelerator, or None; the reason)."""
    operation = layer.operation
    if accelerator is None:
        return None, f"target {target} has no accelerator"
    patterns = accelerator.patterns_for(operation)
    if not patterns:  # the one way a layer is declared to the host (a host-only operation is in no pattern)
        return None, f"no pattern of {target} names {operation}" + (f": {HOST_ONLY[operation]}" if operation in HOST_ONLY else "")
    lowering = lowering_of(operation)
    failures = []
    common = width_violations(layer, accelerator) + shift_violations(layer, accelerator, lowering.shifts(layer, params or {})) + tile_violations(layer, accelerator, lowering.tile_needs(layer, accelerator))
    common += accumulator_violations(layer, params or {}) + lowering.refusals(layer, params or {})
    for pattern in patterns:
        problems = pattern.refusals(layer) + common
        if not problems:
            return pattern, f"matches pattern {pattern.name}"
        failures.append(f"pattern {pattern.name}: {'; '.join(problems)}")
    return None, " | ".join(failures)


def width_violations(layer: IrLayer, accelerator: Accelerator) -> list[str]:
    if layer.activation_bits <= accelerator.activation_bits:
        return []
    return [f"int{layer.activation_bits} activations (TFLite's 16x8 mode): the accelerator's buffers, GEMM and ALU hold "
            f"int{accelerator.activation_bits} values"]


def shift_violations(layer: IrLayer, accelerator: Accelerator, lowered: list | None = None) -> list[str]:
    """The record's shifts and those its lowering encodes (OpLowering.shifts) outside the target's shift_range."""
    low, high = accelerator.shift_range
    return [f"{shift.label} = {shift.amount} outside shift_range [{low}, {high}]" for shift in [*layer.shifts(), *(lowered or [])]
            if not low <= shift.amount <= high]


def tile_violations(layer: IrLayer, accelerator: Accelerator, needs: dict[str, int]) -> list[str]:
    """The smallest tile the operation's lowering (core/backends/accel/ops/) can cut the layer
    into must fit each buffer it uses."""
    buffers = accelerator.buffers
    return [f"a minimal tile needs {need} bytes of the {name} buffer ({getattr(buffers, name)} bytes)"
            for name, need in needs.items() if need > getattr(buffers, name)]


def accumulator_violations(layer: IrLayer, params: dict) -> list[str]:
    """The accelerator accumulates in int32: a layer whose sums (with the bias and the rounding
    constant) could leave it runs on the host, which widens to int64."""
    if "weight" not in params:
        return []
    bound = layer.accumulator_bound(params)
    if bound is None or bound <= INT32_MAX:
        return []
    return ["its accumulators could exceed int32 (sum of |weight| x 128 + |bias << bias_shift| + rounding)"]


# --- the whole plan --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Edges:
    """Who reads what: producers per layer (distinct, in order), readers per tensor (named by
    the layer producing it, "input" for the network input; END_POINT for the network's output)."""

    producers: dict[str, list[str]]
    readers: dict[str, list[str]]

    @classmethod
    def of(cls, ir: Ir) -> "_Edges":
        producers = {layer.name: list(dict.fromkeys(layer.previous_layer)) for layer in ir.layers}
        readers: dict[str, list[str]] = {**{name: [] for name in ir.network_inputs}, **{layer.name: [] for layer in ir.layers}}
        for layer in ir.layers:
            for producer in producers[layer.name]:
                readers[producer].append(layer.name)
            if END_POINT in layer.next_layer:
                readers[layer.name].append(END_POINT)
        return cls(producers, readers)


def partition(ir: Ir, accelerator: Accelerator | None, target: str | None = None) -> PartitionPlan:
    """The plan for running `ir` on `accelerator` (None: all on the host) of the target named `target`."""
    target = target or (accelerator.name if accelerator is not None else "host")
    misdeclared = host_only_errors(accelerator) if accelerator is not None else []
    if misdeclared:
        raise LoweringError(f"target {target}: " + "; ".join(misdeclared))
    edges = _Edges.of(ir)
    matches = {layer.name: match_layer(layer, accelerator, target, ir.params.get(layer.name, {})) for layer in ir.layers}
    on_accel = {name for name, (pattern, _) in matches.items() if pattern is not None}
    members, notes = _regions(ir.layers, edges.producers, on_accel)
    # a function's name is a C symbol and a file name: the target's name with anything else than [A-Za-z0-9_] made '_'
    symbol = re.sub(r"[^A-Za-z0-9_]", "_", target)
    region_names = {name: f"{symbol}_func_{number}" for number, region_layers in enumerate(members) for name in region_layers}
    layout = _layouts(ir.layers, edges, on_accel)
    packs, unpacks = _layout_changes(ir, edges, layout, accelerator)
    groups = [Group(layer.name, index, layer.operation, layer.fused_operators(), HOST if matches[layer.name][0] is None else ACCEL,
                    None if matches[layer.name][0] is None else matches[layer.name][0].name, matches[layer.name][1],
                    region_names.get(layer.name), layout[layer.name], layer.macs())
              for index, layer in enumerate(ir.layers)]
    macs = {group.layer: group.macs for group in groups}
    tensors = [*ir.network_inputs, *(layer.name for layer in ir.layers)]  # named by their producers
    regions = []
    for region_layers in members:
        inside = set(region_layers)
        regions.append(Region(region_names[region_layers[0]], region_layers,
                              [t for t in tensors if t not in inside and any(r in inside for r in edges.readers[t])],
                              [t for t in region_layers if any(r not in inside for r in edges.readers[t])],
                              pack=any(r in inside for change in packs for r in change.readers),
                              unpack=any(change.tensor in inside for change in unpacks),
                              macs=sum(macs[name] for name in region_layers)))
    return PartitionPlan(target, accelerator, groups, regions, packs, unpacks, notes)


def _layout_changes(ir: Ir, edges: _Edges, layout: dict[str, str], accelerator: Accelerator | None) -> tuple[list, list]:
    """(packs, unpacks): each tensor whose readers need the other layout than it is in changes
    once, for all of them."""
    shapes = {layer.name: layer.shape_of_output() for layer in ir.layers}
    operations = {layer.name: layer.operation for layer in ir.layers}
    packs, unpacks = [], []
    for tensor in [*ir.network_inputs, *(layer.name for layer in ir.layers)]:
        wanted = {reader: HOST_LAYOUT if reader == END_POINT else layout[reader] for reader in edges.readers[tensor]}
        have = layout.get(tensor, HOST_LAYOUT)
        changing = [reader for reader, need in wanted.items() if need != have]
        if changing:
            shape = list(ir.shape_of_network_input(tensor) if is_network_input(tensor) else shapes[tensor])
            by_dma = (have == HOST_LAYOUT and len(shape) == 3 and shape[-1] <= accelerator.channel_block
                      and all(lowering_of(operations[reader]).reads_host_layout for reader in changing))
            change = LayoutChange("pack" if have == HOST_LAYOUT else "unpack", tensor, changing, shape,
                                  math.prod(shape), accelerator.packed_bytes(shape), by_dma)
            (packs if change.kind == "pack" else unpacks).append(change)
    return packs, unpacks


def _regions(layers: list[IrLayer], producers: dict[str, list[str]], on_accel: set[str]) -> tuple[list[list[str]], list[str]]:
    """Accelerator layers merged along edges into functions, in execution order. The quotient
    graph (one node per function so far, one per host layer) stays acyclic: two functions joined
    by an edge are merged only when no other path connects them."""
    quotient = nx.DiGraph()
    node_of: dict[str, Any] = {}
    members: dict[Any, list[str]] = {}
    notes = []
    for layer in layers:
        name = layer.name
        node = ("function", name) if name in on_accel else ("host", name)
        node_of[name] = node
        quotient.add_node(node)
        if name in on_accel:
            members[node] = [name]
        for producer in producers[name]:
            if not is_network_input(producer) and node_of[producer] != node:
                quotient.add_edge(node_of[producer], node)
        if name not in on_accel:
            continue
        for producer in producers[name]:
            if producer not in on_accel:
                continue
            first, second = node_of[producer], node_of[name]
            if first == second:
                continue
            detour = _detour(quotient, first, second) or _detour(quotient, second, first)
            if detour is not None:
                notes.append(f"{name} is not merged into the function of {producer}: the path through {detour} "
                             f"would leave the function and come back")
                continue
            nx.contracted_nodes(quotient, first, second, self_loops=False, copy=False)
            members[first].extend(members.pop(second))
            for moved in members[first]:
                node_of[moved] = first
    position = {layer.name: i for i, layer in enumerate(layers)}
    regions = [sorted(names, key=position.__getitem__) for names in members.values()]
    return sorted(regions, key=lambda names: position[names[0]]), notes


def _detour(graph: nx.DiGraph, source: Any, target: Any) -> str | None:
    """A node on a path source -> ... -> target other than the direct edge, if there is one."""
    for successor in graph.successors(source):
        if successor != target and nx.has_path(graph, successor, target):
            kind, name = successor
            return name if kind == "host" else f"the function of {name}"
    return None


def _layouts(layers: list[IrLayer], edges: _Edges, on_accel: set[str]) -> dict[str, str]:
    """The layout each layer reads and writes: accelerator layers the accelerator's; an island of
    connected host element-wise layers the accelerator's when everything feeding it and everything
    it feeds is an accelerator layer (not the network input, not an end point), else the host's."""
    producers, readers = edges.producers, edges.readers
    layout = {layer.name: ACCEL_LAYOUT if layer.name in on_accel else HOST_LAYOUT for layer in layers}
    # element-wise operations compute the same thing on any layout: they may run on packed data (seed 004 [0048])
    elementwise = {layer.name for layer in layers if layer.name not in on_accel and layer.elementwise}
    graph = nx.Graph()
    graph.add_nodes_from(elementwise)
    graph.add_edges_from((producer, name) for name in elementwise for producer in producers[name] if producer in elementwise)
    for island in nx.connected_components(graph):
        feeding = {producer for name in island for producer in producers[name]} - island
        fed = {reader for name in island for reader in readers[name]} - island
        if feeding | fed and (feeding | fed) <= on_accel:
            for name in island:
                layout[name] = ACCEL_LAYOUT
    return layout
