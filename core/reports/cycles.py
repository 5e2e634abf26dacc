"""The estimated cycles per layer of a partitioned program: the accelerator's by instruction kind, the host's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core.backends.accel.cost import CostModel
from core.backends.program import NetworkProgram
from core.reports.figures import new_figure, save, wrapped_title

INSTRUCTION_KINDS = ("load", "gemm", "alu", "store", "host")


def cycles_per_layer(program: NetworkProgram, cost: CostModel, order: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Per layer: the cost model's statistics of an accelerator layer's instructions (`cycles`, `cycles_<kind>`, counts),
    a host layer's (or pack's, unpack's) estimate as `cycles` and `cycles_host`; layers in `order` (the IR's) first, then
    the packs and unpacks."""
    accel = {layer: {**stats, "cycles_host": 0.0} for function in program.functions
             for layer, stats in function.layer_statistics(cost).items()}
    host = {name: {"cycles": cycles, **{f"cycles_{kind}": 0.0 for kind in INSTRUCTION_KINDS}, "cycles_host": cycles}
            for name, cycles in program.host_cycles.items()}
    merged = {**accel, **host}
    ranked = [name for name in (order or []) if name in merged]
    return {name: merged[name] for name in [*ranked, *(name for name in merged if name not in ranked)]}


def plot_cycles(per_layer: dict[str, dict[str, float]], path: str | Path, title: str) -> Path:
    """Estimated cycles per accelerator layer, stacked by instruction kind: horizontal bars, so each layer's
    whole name reads beside its bar (vertical ticks of long TF names were cut at the figure's edge)."""
    names = list(per_layer)
    longest = max((len(name) for name in names), default=10)
    width = 6.0 + 0.055 * longest
    figure = new_figure(width, max(3.0, 0.2 * len(names) + 1.8))
    axes = figure.add_subplot()
    left = np.zeros(len(names))
    positions = np.arange(len(names))
    for kind, colour in zip(INSTRUCTION_KINDS, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:gray")):
        values = np.array([per_layer[name][f"cycles_{kind}"] for name in names])
        axes.barh(positions, values, left=left, color=colour, label=kind.upper())
        left += values
    elapsed = np.array([per_layer[name]["cycles"] for name in names])
    overlapped = not np.allclose(elapsed, left)
    if overlapped:  # units running at once: the bars are each kind's busy cycles, the mark when the layer ends after the one before
        axes.scatter(elapsed, positions, marker="|", s=120, color="black", label="elapsed (units at once)", zorder=3)
    axes.set_yticks(positions, names, fontsize=7.5)
    axes.invert_yaxis()  # program order, top to bottom
    axes.set_xlabel("estimated cycles (target cost model)" + (": busy per kind, elapsed marked" if overlapped else ""))
    axes.set_ylabel("layer (IR order; then packs, unpacks)")
    figure.suptitle(wrapped_title(title, width, fontsize=9), fontsize=9)  # over the whole figure: the names take a third of it
    axes.legend(fontsize=7)
    return save(figure, path, dpi=110)
