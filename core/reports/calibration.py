"""Calibration pictures: every tensor's histogram with the range used, and the longest-tailed tensors' histograms with
each method's threshold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.ticker import LogLocator, MaxNLocator, NullLocator

from core.quantize.calibration.histogram import TensorStatistics
from core.quantize.calibration.methods import METHODS, CalibrationSettings, get_method
from core.quantize.calibration.methods.percentile import percentile_from_histogram
from core.quantize.table import CalibrationTable
from core.reports.figures import new_figure, save, wrapped_title

PLOTTED_TENSORS = 4
TAIL_PERCENTILE = 99.99


def longest_tails(stats: dict[str, TensorStatistics], tensors, count: int) -> list[str]:
    """The `count` tensors whose largest |x| lies farthest beyond their 99.99th percentile, where the methods'
    thresholds part most. Read from the statistics alone: every calibration method of one model and data set shows the
    same tensors, so DVC's and MLflow's side-by-side views compare like with like (the most clipped tensors were each
    method's own)."""
    def tail(tensor: str) -> float:
        observed = stats[tensor]
        body = percentile_from_histogram(observed.counts, observed.bin_width, TAIL_PERCENTILE)
        return observed.absmax / body if body > 0 else (0.0 if observed.absmax == 0 else float("inf"))

    return sorted(tensors, key=lambda tensor: (-tail(tensor), tensor))[:count]


def draw_histogram(axis, stats: TensorStatistics, color: str) -> None:
    """The |x| histogram, counts on a log scale: one filled step polygon, not a bar per bin (2048 patches
    per tensor took minutes to draw for a MobileNetV2's 71 tensors; a Patch's limits walk its path)."""
    edges = stats.bin_edges if stats.absmax > 0 else np.arange(stats.num_bins + 1, dtype=np.float64)
    counts = np.maximum(stats.counts, 0.5)
    axis.fill_between(edges, np.append(counts, counts[-1]), 0.5, step="post", color=color, linewidth=0)
    axis.set_yscale("log")
    axis.yaxis.set_minor_locator(NullLocator())  # a log axis' minor ticks were half of a calibrate run's picture time


def plot_clipping(stats: dict[str, TensorStatistics], table: CalibrationTable, ranges, settings: CalibrationSettings,
                  path: str | Path) -> Path:
    """For the longest-tailed tensors: the |x| histogram (log scale) with each method's threshold, as in seed 002."""
    chosen = longest_tails(stats, [tensor for tensor in table.tensors if tensor in stats], PLOTTED_TENSORS)
    height = 2.6 * len(chosen)
    figure = new_figure(9, height, constrained=False)
    axes = figure.subplots(len(chosen), 1, squeeze=False)
    # fixed margins (tight_layout measured every tick label: a third of the picture's time)
    figure.subplots_adjust(left=0.07, right=0.99, bottom=0.5 / height, top=1 - 0.3 / height, hspace=0.45)
    for axis, tensor in zip(axes[:, 0], chosen):
        tensor_stats = stats[tensor]
        draw_histogram(axis, tensor_stats, color="0.6")
        for color, name in enumerate(sorted(METHODS)):
            method_settings = get_method(name).settings_for(tensor, settings, ranges)
            if method_settings is None:  # a model-range method, and the model gave this tensor none
                continue
            axis.axvline(get_method(name).threshold(tensor_stats, method_settings), label=f"{name} threshold",
                         linestyle="--", linewidth=1.2, color=f"C{color}")
        axis.axvline(table.tensors[tensor].range[1], color="k", label=f"range used ({table.method}, {table.target})")
        axis.set_title(f"{tensor}  clipped {100 * (table.tensors[tensor].clipped_fraction or 0):.3f}%", fontsize=9, y=1.0)
        axis.legend(fontsize=7, ncol=3)
    axes[-1, 0].set_xlabel("|x|")
    return save(figure, path, dpi=90)


GRID_COLUMNS = 4
PANEL_INCHES = (3.4, 2.4)  # at HISTOGRAM_DPI: panels whose titles and ticks read at the picture's real size
HISTOGRAM_DPI = 90


# the histograms one picture shows: beyond, the most clipped (an unrolled LSTM has hundreds of tensors: a picture of
# them all was over 10,000 pixels tall and took twenty seconds to draw)
HISTOGRAM_PANELS = 48


def plot_histograms(stats: dict[str, TensorStatistics], table: CalibrationTable, path: str | Path) -> Path:
    """Each calibrated tensor's |x| histogram (log counts) with the range used: the data behind histograms/*.npy,
    small multiples in the table's order; of more than HISTOGRAM_PANELS tensors, the most clipped, the title says so."""
    calibrated = [tensor for tensor in table.tensors if tensor in stats]
    tensors = calibrated
    if len(calibrated) > HISTOGRAM_PANELS:
        clipped = sorted(calibrated, key=lambda tensor: -(table.tensors[tensor].clipped_fraction or 0))[:HISTOGRAM_PANELS]
        tensors = [tensor for tensor in calibrated if tensor in set(clipped)]
    rows = max(1, -(-len(tensors) // GRID_COLUMNS))
    height = PANEL_INCHES[1] * rows + 1.0
    figure = new_figure(PANEL_INCHES[0] * GRID_COLUMNS, height, constrained=False)  # fixed margins: constrained layout took
    axes = figure.subplots(rows, GRID_COLUMNS, squeeze=False)                       # seconds per dozen axes
    figure.subplots_adjust(left=0.07, right=0.99, bottom=0.45 / height, top=1 - 0.95 / height, wspace=0.3, hspace=0.75)
    for index, (axis, tensor) in enumerate(zip(axes.flat, tensors)):
        tensor_stats, entry = stats[tensor], table.tensors[tensor]
        draw_histogram(axis, tensor_stats, color="0.55")
        axis.axvline(entry.range[1], color="tab:red", linewidth=1.2)
        name = tensor if len(tensor) <= 40 else "…" + tensor[-39:]
        axis.set_title(f"{name}\nclipped {100 * (entry.clipped_fraction or 0):.2g}%", fontsize=8, y=1.0)
        axis.set_xlabel("|x|", fontsize=8, labelpad=1)
        if index % GRID_COLUMNS == 0:
            axis.set_ylabel("count", fontsize=8)
        axis.tick_params(which="both", labelsize=7.5)
        axis.yaxis.set_major_locator(LogLocator(numticks=4))  # no minor ticks: dozens of small axes draw ticks slowly
        axis.yaxis.set_minor_locator(NullLocator())
        axis.xaxis.set_major_locator(MaxNLocator(4))
    for axis in list(axes.flat)[len(tensors):]:
        axis.set_visible(False)
    shown = (f"the {len(tensors)} most clipped of {len(calibrated)} calibrated tensors (all: histograms/*.npy)" if len(tensors) < len(calibrated)
             else f"{len(tensors)} calibrated tensors")
    figure.suptitle(wrapped_title(f"|x| histograms of {shown} ({table.method}, {table.target}); red line: the range used",
                                  PANEL_INCHES[0] * GRID_COLUMNS, fontsize=11),
                    fontsize=11, y=1 - 0.15 / height, va="top")  # in inches: clear of the panels' titles
    return save(figure, path, dpi=HISTOGRAM_DPI)
