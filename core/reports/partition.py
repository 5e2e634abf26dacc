"""The partition as a picture: the graph in columns by depth (longest path from the input), each
layer coloured by where it runs, accelerator functions numbered, pack (^) and unpack (v) marks
on the edges they sit on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch

from core.backends.accel.partition import ACCEL, ACCEL_LAYOUT, HOST, PartitionPlan
from core.ir.network import Ir
from core.ir.op import END_POINT, NETWORK_INPUT
from core.reports.figures import new_figure, save

MAX_COLUMNS_PER_ROW = 26
COLOURS = {ACCEL: "tab:blue", HOST: "tab:orange"}
LEGEND = [
    Line2D([], [], marker="o", color="tab:blue", linestyle="none", markeredgecolor="black", label="accelerator (number: function)"),
    Line2D([], [], marker="o", color="tab:orange", linestyle="none", markeredgecolor="black", label="host"),
    Line2D([], [], marker="o", color="tab:orange", linestyle="none", markeredgecolor="tab:blue", markeredgewidth=2,
           label="host, element-wise on packed data"),
    Line2D([], [], marker="^", color="tab:green", linestyle="none", markeredgecolor="black", label="pack"),
    Line2D([], [], marker="v", color="tab:red", linestyle="none", markeredgecolor="black", label="unpack"),
    Line2D([], [], marker="s", color="black", linestyle="none", label="network input / end point"),
]


@dataclass
class _Layout:
    position: dict[str, tuple[float, float]]  # layer (or "endpoint:<layer>") -> (x, y)
    depth: dict[str, int]
    per_row: int  # depths per band (long graphs wrap into bands)
    bands: int
    heights: list[float]
    ends: list[str]


def _layout(ir: Ir) -> _Layout:
    depth = {NETWORK_INPUT: 0}
    for layer in ir.layers:
        depth[layer.name] = 1 + max(depth[p] for p in layer.previous_layer)
    columns: dict[int, list[str]] = {}
    for name in [NETWORK_INPUT, *(layer.name for layer in ir.layers)]:
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
    ends = ir.end_point_layers
    for name in ends:
        position[f"{END_POINT}:{name}"] = (position[name][0] + 0.6, position[name][1])
    return _Layout(position, depth, per_row, bands, heights, ends)


def _draw_edges(axes, ir: Ir, layout: _Layout) -> None:
    edges = [(p, layer.name) for layer in ir.layers for p in dict.fromkeys(layer.previous_layer)]
    edges += [(name, f"{END_POINT}:{name}") for name in layout.ends]
    for source, target in edges:
        (x0, y0), (x1, y1) = layout.position[source], layout.position[target]
        same_band = layout.depth[source] // layout.per_row == layout.depth[target.removeprefix(f"{END_POINT}:")] // layout.per_row
        bend = 0.25 if same_band and x1 - x0 > 1.01 else 0.0  # arcs for skip connections, clear of the layers between
        axes.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=6, linewidth=0.6,
                                       color="0.55", connectionstyle=f"arc3,rad={bend}", shrinkA=4, shrinkB=4, zorder=1))


def _draw_layout_changes(axes, plan: PartitionPlan, layout: _Layout) -> None:
    for changes, marker, colour in ((plan.packs, "^", "tab:green"), (plan.unpacks, "v", "tab:red")):
        for change in changes:
            for reader in change.readers:
                target = f"{END_POINT}:{change.tensor}" if reader == END_POINT else reader
                (x0, y0), (x1, y1) = layout.position[change.tensor], layout.position[target]
                at = 0.65 if change.kind == "pack" else 0.35  # next to the accelerator side
                axes.plot(x0 + at * (x1 - x0), y0 + at * (y1 - y0), marker=marker, color=colour, markersize=7,
                          markeredgecolor="black", markeredgewidth=0.4, zorder=4, linestyle="none")


def _draw_layers(axes, plan: PartitionPlan, ir: Ir, layout: _Layout) -> None:
    groups = {group.layer: group for group in plan.groups}
    for layer in ir.layers:
        group = groups[layer.name]
        x, y = layout.position[layer.name]
        on_packed = group.target == HOST and group.layout == ACCEL_LAYOUT
        axes.plot(x, y, marker="o", markersize=9, color=COLOURS[group.target], zorder=3, linestyle="none",
                  markeredgecolor="tab:blue" if on_packed else "black", markeredgewidth=2.0 if on_packed else 0.5)
        axes.annotate(layer.label(), (x, y), xytext=(0, -8), textcoords="offset points", ha="center", va="top", fontsize=5)
        if group.region is not None:
            axes.annotate(group.region.rsplit("_", 1)[-1], (x, y), ha="center", va="center", fontsize=4.5, color="white", zorder=5)
    for name, label in [(NETWORK_INPUT, "input"), *((f"{END_POINT}:{n}", "") for n in layout.ends)]:
        axes.plot(*layout.position[name], marker="s", markersize=6, color="black", zorder=3, linestyle="none")
        if label:
            axes.annotate(label, layout.position[name], xytext=(0, -7), textcoords="offset points", ha="center", va="top", fontsize=6)


def plot_partition(plan: PartitionPlan, ir: Ir, path: str | Path) -> Path:
    """The graph coloured by where each layer runs; when nothing runs on the accelerator, the host's
    work instead (a graph of one colour says nothing)."""
    if not any(group.target == ACCEL for group in plan.groups):
        return plot_all_host(plan, path)
    layout = _layout(ir)
    figure = new_figure(max(6.0, 0.5 * layout.per_row + 2.0), max(3.0, 0.5 * sum(layout.heights) + 1.5))
    axes = figure.add_subplot()
    _draw_edges(axes, ir, layout)
    _draw_layout_changes(axes, plan, layout)
    _draw_layers(axes, plan, ir, layout)
    axes.legend(handles=LEGEND, loc="upper left", fontsize=7, ncols=3, frameon=False, bbox_to_anchor=(0.0, 1.0))
    metrics = plan.metrics()
    axes.set_title(f"target {plan.target}: {metrics['layers_accel']}/{metrics['layers']} layers on the accelerator in "
                   f"{metrics['regions']} function(s), MAC share {metrics['mac_share_accel']:.1%},\n{metrics['pack_count']} pack, "
                   f"{metrics['unpack_count']} unpack, {metrics['boundary_bytes']} bytes across", fontsize=9)
    xs = [x for x, _ in layout.position.values()]
    ys = [y for _, y in layout.position.values()]
    axes.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    axes.set_ylim(min(ys) - 0.8, max(ys) + 1.2)
    axes.set_xlabel(f"depth (longest path from the input){f', wrapped every {layout.per_row}' if layout.bands > 1 else ''}")
    axes.set_xticks([])
    axes.set_yticks([])
    for side in ("top", "right", "left", "bottom"):
        axes.spines[side].set_visible(False)
    return save(figure, path, dpi=110)


def plot_all_host(plan: PartitionPlan, path: str | Path) -> Path:
    """Every layer on the host: MACs per layer (execution order), coloured by why it stays there."""
    groups = sorted(plan.groups, key=lambda group: group.index)
    reasons = list(dict.fromkeys(group.reason for group in groups))
    longest = max((len(group.layer) for group in groups), default=10)
    figure = new_figure(6.5 + 0.055 * longest, max(3.0, 0.17 * len(groups) + 2.2))
    axes = figure.add_subplot()
    colours = {reason: f"C{index % 10}" for index, reason in enumerate(reasons)}
    axes.barh(range(len(groups)), [max(group.macs, 1) for group in groups], color=[colours[group.reason] for group in groups])
    axes.set_yticks(range(len(groups)), [f"{group.layer} ({group.operation})" for group in groups], fontsize=6)
    axes.invert_yaxis()
    axes.set_xscale("log")
    axes.set_xlabel("multiply-accumulates per inference (log scale; 1 for layers without MACs)")
    axes.legend(handles=[Line2D([], [], marker="s", linestyle="none", color=colours[reason], label=reason[:90]) for reason in reasons],
                fontsize=6, loc="lower right")
    total = sum(group.macs for group in groups)
    axes.set_title(f"target {plan.target}: all {len(groups)} layers ({total:,} MACs) run on the host", fontsize=9)
    return save(figure, path, dpi=110)
