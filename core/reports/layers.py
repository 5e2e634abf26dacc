"""Per-layer bar charts (annotate's SQNR, simulate's agreement)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core.quantize.evaluation import SQNR_CAP_DB
from core.reports.figures import new_figure, save, wrapped_title


def _height(names: list[str]) -> float:
    """Inches for a chart whose x ticks are these names, turned upright: the plot keeps ~2.5 in whatever their length."""
    return 2.9 + 0.06 * max((len(name) for name in names), default=10)


def plot_layer_sqnr(per_layer: dict[str, float], path: str | Path, title: str, y_label: str = f"SQNR (dB, capped at {SQNR_CAP_DB:g})") -> Path:
    """A PNG bar chart of one figure per layer (SQNR unless `y_label` says otherwise), in the dict's (execution) order."""
    names, values = list(per_layer), [float(v) for v in per_layer.values()]
    width = max(6.0, 0.25 * len(names) + 2.0)
    figure = new_figure(width, _height(names))
    axes = figure.add_subplot()
    positions = np.arange(len(names))
    axes.bar(positions, values, color="tab:blue")
    axes.plot(positions, values, color="tab:orange", marker=".", linewidth=1)
    axes.set_xticks(positions, names, rotation=90, fontsize=7)
    axes.set_ylabel(y_label)
    axes.set_xlabel("layer (execution order)")
    axes.set_title(wrapped_title(title, width, fontsize=11), fontsize=11)
    axes.grid(axis="y", alpha=0.3)
    return save(figure, path, dpi=120)


def plot_sensitivity(only_this: dict[str, float], all_but_this: dict[str, float], path: str | Path, title: str) -> Path:
    """Per layer (execution order): end-point SQNR with only that layer quantized, and with all but it."""
    names = list(only_this)
    width = max(6.0, 0.25 * len(names) + 2.0)
    figure = new_figure(width, _height(names))
    axes = figure.add_subplot()
    positions = np.arange(len(names))
    axes.bar(positions - 0.2, [only_this[name] for name in names], width=0.4, color="tab:blue", label="only this layer quantized")
    axes.bar(positions + 0.2, [all_but_this[name] for name in names], width=0.4, color="tab:orange", label="all but this layer quantized")
    axes.set_xticks(positions, names, rotation=90, fontsize=7)
    axes.set_ylabel("end-point SQNR vs float (dB)")
    axes.set_xlabel("layer (execution order)")
    axes.set_title(wrapped_title(title, width, fontsize=11), fontsize=11)
    axes.set_ylim(top=1.2 * max([*only_this.values(), *all_but_this.values(), 1.0]))  # room for the legend above the bars
    axes.legend(fontsize=7, ncols=2, loc="upper center")
    axes.grid(axis="y", alpha=0.3)
    return save(figure, path, dpi=120)
