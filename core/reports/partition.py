"""The partition as a picture: one bar per layer in execution order (its MACs, log scale), coloured by
where it runs (each accelerator function its own colour; the host by the reason the layer stays there),
with the pack (▲) and unpack (▼) points beside the layers that read or write them. Each layer's name
reads beside its bar (a drawing of the graph left most of the picture empty), a long fused name shortened around an
ellipsis; the legend, every host reason whole, sits beneath the bars, covering none."""

from __future__ import annotations

import textwrap
from pathlib import Path

from matplotlib.lines import Line2D

from core.backends.accel.partition import ACCEL, Group, PartitionPlan
from core.reports.figures import new_figure, save, wrapped_title

HOST_COLOURS = ("tab:orange", "tab:red", "tab:brown", "tab:pink", "tab:olive", "tab:gray", "gold", "salmon", "peru", "khaki",
                "rosybrown", "orchid")
ACCEL_COLOURS = ("tab:blue", "tab:cyan", "tab:green", "tab:purple")
LABEL_CHARACTERS = 44  # a layer's name beside its bar: TFLite's fused names run to 200 characters
POINTS_PER_CHARACTER = 0.6  # about 0.6 em a character


def short_name(name: str, limit: int = LABEL_CHARACTERS) -> str:
    """`name` whole, or its start and its end around an ellipsis (a fused TFLite name ends with the operator's own)."""
    if len(name) <= limit:
        return name
    head = (limit - 1) // 3
    return f"{name[:head]}…{name[-(limit - 1 - head):]}"


def where(group: Group) -> str:
    """The legend entry of a layer: its accelerator function, or the host and why."""
    return f"accelerator function {group.region}" if group.target == ACCEL else f"host: {group.reason}"


def _colours(groups: list[Group]) -> dict[str, str]:
    places = list(dict.fromkeys(where(group) for group in groups))
    accel = [place for place in places if place.startswith("accelerator")]
    host = [place for place in places if not place.startswith("accelerator")]
    return {**{place: ACCEL_COLOURS[index % len(ACCEL_COLOURS)] for index, place in enumerate(accel)},
            **{place: HOST_COLOURS[index % len(HOST_COLOURS)] for index, place in enumerate(host)}}


def _layout_marks(plan: PartitionPlan) -> dict[str, str]:
    """Layer -> the marks beside its bar: ▲ where a tensor it reads was packed, ▼ where its output is unpacked."""
    marks: dict[str, str] = {}
    for change in plan.packs:
        for reader in change.readers:
            marks[reader] = marks.get(reader, "") + "▲"
    for change in plan.unpacks:
        marks[change.tensor] = marks.get(change.tensor, "") + "▼"
    return marks


def _title(plan: PartitionPlan, groups: list[Group]) -> str:
    metrics = plan.metrics()
    total = sum(group.macs for group in groups)
    if not metrics["layers_accel"]:
        return f"target {plan.target}: all {len(groups)} layers ({total:,} MACs) run on the host"
    return (f"target {plan.target}: {metrics['layers_accel']}/{metrics['layers']} layers on the accelerator in "
            f"{metrics['regions']} function(s), MAC share {metrics['mac_share_accel']:.1%} of {total:,}; "
            f"{metrics['pack_count']} pack (▲), {metrics['unpack_count']} unpack (▼), {metrics['boundary_bytes']:,} bytes across")


def plot_partition(plan: PartitionPlan, path: str | Path) -> Path:
    groups = sorted(plan.groups, key=lambda group: group.index)
    colours, marks = _colours(groups), _layout_marks(plan)
    # the execution index first: shortened fused names can end alike (every depthwise layer's "..._resource1")
    labels = [f"{group.index}: {short_name(group.layer)} ({group.operation})" for group in groups]
    label_inches = max((len(label) for label in labels), default=10) * POINTS_PER_CHARACTER * 7.5 / 72
    width = 6.0 + label_inches
    # the legend beneath the bars, each place (a host reason whole) wrapped to the figure's width
    legend_characters = int(width * 72 / (POINTS_PER_CHARACTER * 7)) - 8
    places = {textwrap.fill(place, legend_characters, subsequent_indent="  "): colour for place, colour in colours.items()}
    legend_lines = sum(place.count("\n") + 1 for place in places)
    figure = new_figure(width, max(3.0, 0.2 * len(groups) + 2.6 + 0.16 * legend_lines))
    axes = figure.add_subplot()
    macs = [max(group.macs, 1) for group in groups]
    axes.barh(range(len(groups)), macs, color=[colours[where(group)] for group in groups])
    for row, group in enumerate(groups):
        if group.layer in marks:
            axes.annotate(marks[group.layer], (macs[row], row), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    axes.set_yticks(range(len(groups)), labels, fontsize=7.5)
    axes.invert_yaxis()  # execution order, top to bottom
    axes.set_xscale("log")
    axes.set_xlabel("multiply-accumulates per inference (log scale; 1 for layers without MACs)")
    axes.set_ylabel("layer (execution order)")
    figure.legend(handles=[Line2D([], [], marker="s", linestyle="none", color=colour, label=place) for place, colour in places.items()],
                  fontsize=7, loc="outside lower left", frameon=False)
    axes.set_title(wrapped_title(_title(plan, groups), width - label_inches, fontsize=9), fontsize=9)
    return save(figure, path, dpi=110)
