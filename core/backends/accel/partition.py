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
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from core.backends.accel.target import Accelerator, Pattern
from core.ir.io import END_POINT, NETWORK_INPUT, Ir

ACCEL, HOST = "accel", "host"
ACCEL_LAYOUT, HOST_LAYOUT = "accelerator", "host"
# Operators whose every output element depends only on the input elements at the same position:
# they compute the same thing on any layout, so they may run on packed data (seed 004 [0048]).
ELEMENTWISE_OPERATIONS = frozenset({"add"})
ACCUMULATOR_BYTES = 4  # int32


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


@dataclass
class PartitionPlan:
    target: str
    accelerator: Accelerator | None
    groups: list[Group]
    regions: list[Region]
    packs: list[LayoutChange]
    unpacks: list[LayoutChange]
    notes: list[str] = field(default_factory=list)

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


# --- layer geometry from the IR fields ------------------------------------------------------


def _hw(size: dict) -> list[int]:
    return [size["height"], size["width"]]


def output_shape(layer: dict) -> list[int]:
    """The layer's output shape without the batch: HWC, or a reshape's output_shape."""
    operation = layer["operation"]
    if operation == "reshape":
        return list(layer["output_shape"])
    if operation == "add":
        return [*_hw(layer["input_size"]), layer["input_channel_num"]]
    if operation == "resize_bilinear":
        return [*_hw(layer["output_size"]), layer["input_channel_num"]]
    return [*_hw(layer["output_size"]), layer["output_channel_num"]]


def input_shape(layer: dict, position: int) -> list[int]:
    """The shape of the layer's input at `position` (previous_layer order)."""
    operation = layer["operation"]
    if operation == "reshape":
        return list(layer["input_shape"])
    if operation == "concat2":
        return [*_hw(layer[f"input{position}_size"]), layer[f"input{position}_channel_num"]]
    return [*_hw(layer["input_size"]), layer["input_channel_num"]]


def layer_macs(layer: dict) -> int:
    """Multiply-accumulates of one inference: conv Ho*Wo*Co*Kh*Kw*Ci, dwconv Ho*Wo*C*Kh*Kw;
    the other operations multiply nothing (adds, window sums and maxima, data movement)."""
    operation = layer["operation"]
    if operation not in ("conv", "dwconv"):
        return 0
    window = layer["kernel_size"]["height"] * layer["kernel_size"]["width"]
    outputs = math.prod(output_shape(layer))
    return outputs * window * (layer["input_channel_num"] if operation == "conv" else 1)


def fused_operators(layer: dict) -> list[str]:
    operation = layer["operation"]
    activation = ["relu6"] if layer.get("activation_type") == "Relu6" else []
    if operation in ("conv", "dwconv"):
        core = "conv2d" if operation == "conv" else "depthwise_conv2d"
        return [core, *(["bias_add"] if layer["load_bias"] else []), "requantize", *activation]
    if operation == "add":
        return ["add", "requantize", *activation]
    if operation == "avg_pool":
        return [operation, "requantize"]  # the window sum's division is a requantization
    if operation == "max_pool":
        return [operation, *(["requantize"] if layer["input_log2scale"] != layer["output_log2scale"] else [])]
    return [operation]


# --- 1. pattern matching and annotation ------------------------------------------------------


def match_layer(layer: dict, accelerator: Accelerator | None, target: str, params: dict | None = None) -> tuple[Pattern | None, str]:
    """(the pattern that runs the layer on the accelerator, or None; the reason)."""
    operation = layer["operation"]
    if accelerator is None:
        return None, f"target {target} has no accelerator"
    if operation in accelerator.unsupported:
        return None, f"{operation} is unsupported by {target} (always on the host)"
    patterns = accelerator.patterns_for(operation)
    if not patterns:
        return None, f"no pattern of {target} covers {operation}"
    failures = []
    common = shift_violations(layer, accelerator) + tile_violations(layer, accelerator) + accumulator_violations(layer, params or {})
    for pattern in patterns:
        problems = pattern_violations(pattern, layer) + common
        if not problems:
            return pattern, f"matches pattern {pattern.name}"
        failures.append(f"pattern {pattern.name}: {'; '.join(problems)}")
    return None, " | ".join(failures)


def pattern_violations(pattern: Pattern, layer: dict) -> list[str]:
    problems = []
    if pattern.activations is not None and layer["activation_type"] not in pattern.activations:
        problems.append(f"activation {layer['activation_type']} not in {list(pattern.activations)}")
    if pattern.max_kernel is not None:
        kernel = _hw(layer["kernel_size"])
        if kernel[0] > pattern.max_kernel[0] or kernel[1] > pattern.max_kernel[1]:
            problems.append(f"kernel {kernel[0]}x{kernel[1]} exceeds max_kernel {pattern.max_kernel[0]}x{pattern.max_kernel[1]}")
    if pattern.strides is not None:
        stride = _hw(layer["stride"])
        # along an axis with one output position (a global pool) the stride is never applied
        if any(s not in pattern.strides and out > 1 for s, out in zip(stride, _hw(layer["output_size"]))):
            problems.append(f"stride {stride[0]}x{stride[1]} not in strides {list(pattern.strides)}")
    if pattern.padding is False and any(layer["padding"].values()):
        pad = layer["padding"]
        problems.append(f"padding {[pad['top'], pad['bottom'], pad['left'], pad['right']]} unsupported (padding: false)")
    if pattern.dilation is False:
        dilation = _hw(layer.get("dilations", {"height": 1, "width": 1}))
        if dilation != [1, 1]:
            problems.append(f"dilation {dilation[0]}x{dilation[1]} unsupported (dilation: false)")
    if pattern.pow2_window:
        count = layer["kernel_size"]["height"] * layer["kernel_size"]["width"]
        if count & (count - 1):
            problems.append(f"window of {count} elements is not a power of two (pow2_window: the mean must be a shift)")
    return problems


def _shifts(layer: dict) -> dict[str, int]:
    """The shift amounts the layer's requantization needs (magnitudes; the sign is the direction)."""
    operation = layer["operation"]
    if operation in ("conv", "dwconv"):
        return {"output_shift": layer["output_shift"], **({"bias_shift": layer["bias_shift"]} if layer["load_bias"] else {})}
    if operation == "add":
        return {"|output_shift_bit|": abs(layer["output_shift_bit"]),
                "|pl_log2scale - add_log2scale|": abs(layer["pl_log2scale"] - layer["add_log2scale"])}
    if operation == "avg_pool":
        return {"input_pre_ls": layer["input_pre_ls"]}
    if operation == "max_pool":
        return {"|input_log2scale - output_log2scale|": abs(layer["input_log2scale"] - layer["output_log2scale"])}
    return {}


def shift_violations(layer: dict, accelerator: Accelerator) -> list[str]:
    low, high = accelerator.shift_range
    return [f"{name} = {value} outside shift_range [{low}, {high}]" for name, value in _shifts(layer).items() if not low <= value <= high]


def tile_violations(layer: dict, accelerator: Accelerator) -> list[str]:
    """The smallest tile the lowering (core/ops, `lower_accel`) can cut a windowed layer into,
    one row of output vectors of one channel block, must fit each buffer it uses: conv/dwconv
    the input buffer (the window's rows of padded input), the weight buffer (one block per
    window tap; dwconv as a block-diagonal GEMM) and the accumulators (the row's int32
    results); a pool the accumulator buffer (the input rows, int8 widened to int32, and the
    results)."""
    from core.backends.accel.lowering import Window

    if layer["operation"] not in ("conv", "dwconv", "avg_pool", "max_pool"):
        return []
    block = accelerator.channel_block
    window = Window.of(layer)
    input_vectors = window.input_rows(1) * window.padded_width
    if layer["operation"] in ("conv", "dwconv"):
        needs = {"input": input_vectors * block, "weight": window.taps * block * block,
                 "accumulator": window.out_width * block * ACCUMULATOR_BYTES}
    else:
        needs = {"accumulator": (input_vectors + window.out_width) * block * ACCUMULATOR_BYTES}
    buffers = accelerator.buffers
    return [f"a minimal tile needs {need} bytes of the {name} buffer ({getattr(buffers, name)} bytes)"
            for name, need in needs.items() if need > getattr(buffers, name)]


def accumulator_violations(layer: dict, params: dict) -> list[str]:
    """The accelerator accumulates in int32: a conv/dwconv whose sums (with the bias and the
    rounding constant) could leave it runs on the host, which widens to int64."""
    from core.ir.ops.conv import accumulator_fits_int32

    if layer["operation"] not in ("conv", "dwconv") or "weight" not in params:
        return []
    if accumulator_fits_int32(layer, params):
        return []
    return ["its accumulators could exceed int32 (sum of |weight| x 128 + |bias << bias_shift| + rounding)"]


# --- the whole plan --------------------------------------------------------------------------


def partition(ir: Ir, accelerator: Accelerator | None, target: str | None = None) -> PartitionPlan:
    """The plan for running `ir` on `accelerator` (None: all on the host) of the target named `target`."""
    target = target or (accelerator.name if accelerator is not None else "host")
    layers = ir.layers
    producers = {layer["name"]: list(dict.fromkeys(layer["previous_layer"])) for layer in layers}
    readers: dict[str, list[str]] = {NETWORK_INPUT: [], **{layer["name"]: [] for layer in layers}}
    for layer in layers:
        for producer in producers[layer["name"]]:
            readers[producer].append(layer["name"])
    for layer in layers:
        if END_POINT in layer["next_layer"]:
            readers[layer["name"]].append(END_POINT)

    matches = {layer["name"]: match_layer(layer, accelerator, target, ir.params.get(layer["name"], {})) for layer in layers}
    on_accel = {name for name, (pattern, _) in matches.items() if pattern is not None}
    members, notes = _regions(layers, producers, on_accel)
    region_names = {}
    for number, region_layers in enumerate(members):
        for name in region_layers:
            region_names[name] = f"{target}_func_{number}"

    layout = _layouts(layers, producers, readers, on_accel)
    shapes = {layer["name"]: output_shape(layer) for layer in layers}
    for layer in layers:
        for position, producer in enumerate(layer["previous_layer"]):
            if producer == NETWORK_INPUT:
                shapes.setdefault(NETWORK_INPUT, input_shape(layer, position))
    tensors = [NETWORK_INPUT, *(layer["name"] for layer in layers)]  # named by their producers
    packs, unpacks = [], []
    for tensor in tensors:
        wanted = {reader: HOST_LAYOUT if reader == END_POINT else layout[reader] for reader in readers[tensor]}
        have = layout.get(tensor, HOST_LAYOUT)
        changing = [reader for reader, need in wanted.items() if need != have]
        if changing:
            shape = shapes[tensor]
            change = LayoutChange("pack" if have == HOST_LAYOUT else "unpack", tensor, changing, shape,
                                  math.prod(shape), accelerator.packed_bytes(shape))
            (packs if change.kind == "pack" else unpacks).append(change)

    groups = []
    for index, layer in enumerate(layers):
        name = layer["name"]
        pattern, reason = matches[name]
        groups.append(Group(name, index, layer["operation"], fused_operators(layer), HOST if pattern is None else ACCEL,
                            None if pattern is None else pattern.name, reason, region_names.get(name), layout[name], layer_macs(layer)))
    macs = {group.layer: group.macs for group in groups}
    regions = []
    for region_layers in members:
        inside = set(region_layers)
        inputs = [t for t in tensors if t not in inside and any(r in inside for r in readers[t])]
        outputs = [t for t in region_layers if any(r not in inside for r in readers[t])]
        regions.append(Region(region_names[region_layers[0]], region_layers, inputs, outputs,
                              pack=any(r in inside for change in packs for r in change.readers),
                              unpack=any(change.tensor in inside for change in unpacks),
                              macs=sum(macs[name] for name in region_layers)))
    return PartitionPlan(target, accelerator, groups, regions, packs, unpacks, notes)


def _regions(layers: list[dict], producers: dict[str, list[str]], on_accel: set[str]) -> tuple[list[list[str]], list[str]]:
    """Accelerator layers merged along edges into functions, in execution order. The quotient
    graph (one node per function so far, one per host layer) stays acyclic: two functions joined
    by an edge are merged only when no other path connects them."""
    quotient = nx.DiGraph()
    node_of: dict[str, Any] = {}
    members: dict[Any, list[str]] = {}
    notes = []
    for layer in layers:
        name = layer["name"]
        node = ("function", name) if name in on_accel else ("host", name)
        node_of[name] = node
        quotient.add_node(node)
        if name in on_accel:
            members[node] = [name]
        for producer in producers[name]:
            if producer != NETWORK_INPUT and node_of[producer] != node:
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
    position = {layer["name"]: i for i, layer in enumerate(layers)}
    regions = [sorted(names, key=position.__getitem__) for names in members.values()]
    return sorted(regions, key=lambda names: position[names[0]]), notes


def _detour(graph: nx.DiGraph, source: Any, target: Any) -> str | None:
    """A node on a path source -> ... -> target other than the direct edge, if there is one."""
    for successor in graph.successors(source):
        if successor != target and nx.has_path(graph, successor, target):
            kind, name = successor
            return name if kind == "host" else f"the function of {name}"
    return None


def _layouts(layers: list[dict], producers: dict[str, list[str]], readers: dict[str, list[str]], on_accel: set[str]) -> dict[str, str]:
    """The layout each layer reads and writes: accelerator layers the accelerator's; an island of
    connected host element-wise layers the accelerator's when everything feeding it and everything
    it feeds is an accelerator layer (not the network input, not an end point), else the host's."""
    layout = {layer["name"]: ACCEL_LAYOUT if layer["name"] in on_accel else HOST_LAYOUT for layer in layers}
    elementwise = {layer["name"] for layer in layers if layer["name"] not in on_accel and layer["operation"] in ELEMENTWISE_OPERATIONS}
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


# --- picture -----------------------------------------------------------------------------------

MAX_COLUMNS_PER_ROW = 26
_SHORT = {"conv": "conv", "dwconv": "dw", "add": "add", "avg_pool": "avg", "max_pool": "max", "reshape": "rshp",
          "concat2": "cat", "resize_bilinear": "rsz"}


def _label(layer: dict) -> str:
    short = _SHORT.get(layer["operation"], layer["operation"])
    if "kernel_size" in layer:
        kernel, stride = layer["kernel_size"], layer["stride"]
        short += f"{kernel['height']}x{kernel['width']}" + (f"/{stride['height']}" if stride["height"] > 1 else "")
    return short


def plot_partition(plan: PartitionPlan, ir: Ir, path: str | Path) -> Path:
    """The graph in columns by depth (longest path from the input), each layer coloured by where
    it runs, accelerator functions numbered, pack (^) and unpack (v) marks on the edges they sit
    on. A bare Figure on the Agg canvas, as core.quantize.evaluation's plots."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    layers = ir.layers
    depth = {NETWORK_INPUT: 0}
    for layer in layers:
        depth[layer["name"]] = 1 + max(depth[p] for p in layer["previous_layer"])
    columns: dict[int, list[str]] = {}
    for name in [NETWORK_INPUT, *(layer["name"] for layer in layers)]:
        columns.setdefault(depth[name], []).append(name)
    # long graphs wrap: depths 0..per_row-1 on the first band, the next per_row on the one below, ...
    per_row = len(columns) if len(columns) <= MAX_COLUMNS_PER_ROW else -(-len(columns) // -(-len(columns) // MAX_COLUMNS_PER_ROW))
    bands = -(-len(columns) // per_row)
    heights = [max(len(columns[c]) for c in columns if c // per_row == b) + 1.2 for b in range(bands)]
    tops = [-sum(heights[:b]) - heights[b] / 2 for b in range(bands)]  # each band's centre line
    position = {}
    for column, names in columns.items():
        for row, name in enumerate(names):
            position[name] = (float(column % per_row), tops[column // per_row] + (len(names) - 1) / 2 - row)
    ends = [layer["name"] for layer in layers if END_POINT in layer["next_layer"]]
    for name in ends:
        position[f"{END_POINT}:{name}"] = (position[name][0] + 0.6, position[name][1])

    width = max(6.0, 0.5 * per_row + 2.0)
    height = max(3.0, 0.5 * sum(heights) + 1.5)
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    groups = {group.layer: group for group in plan.groups}
    colours = {ACCEL: "tab:blue", HOST: "tab:orange"}

    edges = [(p, layer["name"]) for layer in layers for p in dict.fromkeys(layer["previous_layer"])]
    edges += [(name, f"{END_POINT}:{name}") for name in ends]
    for source, target in edges:
        (x0, y0), (x1, y1) = position[source], position[target]
        same_band = depth[source] // per_row == depth[target.removeprefix(f"{END_POINT}:")] // per_row
        bend = 0.25 if same_band and x1 - x0 > 1.01 else 0.0  # arcs for skip connections, clear of the layers between
        axes.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=6, linewidth=0.6,
                                       color="0.55", connectionstyle=f"arc3,rad={bend}", shrinkA=4, shrinkB=4, zorder=1))
    for changes, marker, colour in ((plan.packs, "^", "tab:green"), (plan.unpacks, "v", "tab:red")):
        for change in changes:
            for reader in change.readers:
                target = f"{END_POINT}:{change.tensor}" if reader == END_POINT else reader
                (x0, y0), (x1, y1) = position[change.tensor], position[target]
                at = 0.65 if change.kind == "pack" else 0.35  # next to the accelerator side
                axes.plot(x0 + at * (x1 - x0), y0 + at * (y1 - y0), marker=marker, color=colour, markersize=7,
                          markeredgecolor="black", markeredgewidth=0.4, zorder=4, linestyle="none")

    for layer in layers:
        group = groups[layer["name"]]
        x, y = position[layer["name"]]
        on_packed = group.target == HOST and group.layout == ACCEL_LAYOUT
        axes.plot(x, y, marker="o", markersize=9, color=colours[group.target], zorder=3, linestyle="none",
                  markeredgecolor="tab:blue" if on_packed else "black", markeredgewidth=2.0 if on_packed else 0.5)
        axes.annotate(_label(layer), (x, y), xytext=(0, -8), textcoords="offset points", ha="center", va="top", fontsize=5)
        if group.region is not None:
            axes.annotate(group.region.rsplit("_", 1)[-1], (x, y), ha="center", va="center", fontsize=4.5, color="white", zorder=5)
    for name, marker, label in [(NETWORK_INPUT, "s", "input"), *((f"{END_POINT}:{n}", "s", "") for n in ends)]:
        axes.plot(*position[name], marker=marker, markersize=6, color="black", zorder=3, linestyle="none")
        if label:
            axes.annotate(label, position[name], xytext=(0, -7), textcoords="offset points", ha="center", va="top", fontsize=6)

    legend = [
        Line2D([], [], marker="o", color="tab:blue", linestyle="none", markeredgecolor="black", label="accelerator (number: function)"),
        Line2D([], [], marker="o", color="tab:orange", linestyle="none", markeredgecolor="black", label="host"),
        Line2D([], [], marker="o", color="tab:orange", linestyle="none", markeredgecolor="tab:blue", markeredgewidth=2,
               label="host, element-wise on packed data"),
        Line2D([], [], marker="^", color="tab:green", linestyle="none", markeredgecolor="black", label="pack"),
        Line2D([], [], marker="v", color="tab:red", linestyle="none", markeredgecolor="black", label="unpack"),
        Line2D([], [], marker="s", color="black", linestyle="none", label="network input / end point"),
    ]
    axes.legend(handles=legend, loc="upper left", fontsize=7, ncols=3, frameon=False, bbox_to_anchor=(0.0, 1.0))
    metrics = plan.metrics()
    axes.set_title(f"target {plan.target}: {metrics['layers_accel']}/{metrics['layers']} layers on the accelerator in "
                   f"{metrics['regions']} function(s), MAC share {metrics['mac_share_accel']:.1%},\n{metrics['pack_count']} pack, "
                   f"{metrics['unpack_count']} unpack, {metrics['boundary_bytes']} bytes across", fontsize=9)
    xs = [x for x, _ in position.values()]
    ys = [y for _, y in position.values()]
    axes.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    axes.set_ylim(min(ys) - 0.8, max(ys) + 1.2)
    axes.set_xlabel(f"depth (longest path from the input){f', wrapped every {per_row}' if bands > 1 else ''}")
    axes.set_xticks([])
    axes.set_yticks([])
    for side in ("top", "right", "left", "bottom"):
        axes.spines[side].set_visible(False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path
