"""The accelerator's estimated cycles per layer."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core.backends.accel.cost import CostModel
from core.backends.program import NetworkProgram
from core.reports.figures import new_figure, save


def plot_cycles(program: NetworkProgram, cost: CostModel, path: str | Path, title: str) -> Path:
    """Estimated cycles per accelerator layer, stacked by instruction kind."""
    per_layer = {layer: stats for function in program.functions for layer, stats in function.layer_statistics(cost).items()}
    names = list(per_layer)
    figure = new_figure(max(6.0, 0.22 * len(names) + 2.5), 4.8)
    axes = figure.add_subplot()
    bottom = np.zeros(len(names))
    for kind, colour in (("load", "tab:blue"), ("gemm", "tab:orange"), ("alu", "tab:green"), ("store", "tab:red")):
        values = np.array([per_layer[name][f"cycles_{kind}"] for name in names])
        axes.bar(range(len(names)), values, bottom=bottom, color=colour, label=kind.upper())
        bottom += values
    axes.set_xticks(range(len(names)), [name[-28:] for name in names], rotation=90, fontsize=5)
    axes.set_ylabel("estimated cycles (target cost model)")
    axes.set_title(title, fontsize=9)
    axes.legend(fontsize=7)
    return save(figure, path, dpi=110)
