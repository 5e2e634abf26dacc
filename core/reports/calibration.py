"""Calibration pictures: the histograms of the most clipped tensors with each method's threshold."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

from core.quantize.calibration.histogram import TensorStatistics
from core.quantize.calibration.methods import METHODS, CalibrationSettings, get_method
from core.quantize.table import CalibrationTable
from core.reports.figures import new_figure, save

PLOTTED_TENSORS = 4


def plot_clipping(stats: dict[str, TensorStatistics], table: CalibrationTable, ranges, settings: CalibrationSettings,
                  path: str | Path) -> Path:
    """For the most clipped tensors: the |x| histogram (log scale) with each method's threshold, as in seed 002."""
    ranked = sorted((entry.clipped_fraction or 0.0, tensor) for tensor, entry in table.tensors.items() if tensor in stats)
    chosen = [tensor for _, tensor in reversed(ranked[-PLOTTED_TENSORS:])]
    figure = new_figure(9, 2.6 * len(chosen), constrained=False)
    axes = figure.subplots(len(chosen), 1, squeeze=False)
    for axis, tensor in zip(axes[:, 0], chosen):
        tensor_stats = stats[tensor]
        axis.bar(tensor_stats.bin_centers, np.maximum(tensor_stats.counts, 0.5), width=tensor_stats.bin_width or 1.0, log=True, color="0.6")
        for color, name in enumerate(sorted(METHODS)):
            method_settings = settings
            if name == "qat":
                if tensor not in ranges:
                    continue
                method_settings = dataclasses.replace(settings, fake_quant_range=(ranges[tensor].min, ranges[tensor].max))
            axis.axvline(get_method(name).threshold(tensor_stats, method_settings), label=f"{name} threshold",
                         linestyle="--", linewidth=1.2, color=f"C{color}")
        axis.axvline(table.tensors[tensor].range[1], color="k", label=f"range used ({table.method}, {table.target})")
        axis.set_title(f"{tensor}  clipped {100 * (table.tensors[tensor].clipped_fraction or 0):.3f}%", fontsize=9)
        axis.legend(fontsize=7, ncol=3)
    axes[-1, 0].set_xlabel("|x|")
    figure.tight_layout()
    return save(figure, path, dpi=90)


GRID_COLUMNS = 6


def plot_histograms(stats: dict[str, TensorStatistics], table: CalibrationTable, path: str | Path) -> Path:
    """Every calibrated tensor's |x| histogram (log counts) with the range used: one picture of the
    data behind histograms/*.npy, small multiples in the table's order."""
    tensors = [tensor for tensor in table.tensors if tensor in stats]
    rows = max(1, -(-len(tensors) // GRID_COLUMNS))
    figure = new_figure(2.4 * GRID_COLUMNS, 1.7 * rows + 0.6, constrained=True)
    axes = figure.subplots(rows, GRID_COLUMNS, squeeze=False)
    for axis, tensor in zip(axes.flat, tensors):
        tensor_stats, entry = stats[tensor], table.tensors[tensor]
        axis.bar(tensor_stats.bin_centers, np.maximum(tensor_stats.counts, 0.5), width=tensor_stats.bin_width or 1.0, log=True,
                 color="0.55")
        axis.axvline(entry.range[1], color="tab:red", linewidth=1.0)
        axis.set_title(f"{tensor[-34:]}\nclipped {100 * (entry.clipped_fraction or 0):.2g}%", fontsize=5.5)
        axis.tick_params(which="both", labelsize=5)
        axis.yaxis.set_minor_formatter(NullFormatter())
    for axis in list(axes.flat)[len(tensors):]:
        axis.set_visible(False)
    figure.suptitle(f"|x| histograms of {len(tensors)} tensors ({table.method}, {table.target}); red: the range used", fontsize=9)
    return save(figure, path, dpi=70)
