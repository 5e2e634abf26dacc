"""calibrate: one streaming pass of the calibration data through the folded float
graph collects min/max/absmax and a histogram of |x| for every tensor the IR
holds in int8; the configured method turns them into thresholds, the target
into scales. A QAT graph is calibrated as the float graph it contains."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from core.quantize.table import CalibrationTable
from core.quantize.calibration.histogram import TensorStatistics
from core.quantize.calibration.methods import METHODS, CalibrationSettings, get_method
from core.quantize.calibration.build import CalibrationError, TargetSpec, build_calibration_table
from core.data.datasets import load_split
from core.frontend.graph import Graph
from core.frontend.layers import LayerGraph, bypass_fake_quant, group_layers
from core.frontend.tf_runtime import GraphRunner
from core.quantize.statistics import add_statistics_ops, observations
from pipeline.config import to_plain

HISTOGRAM_DIR = "histograms"
PLOTTED_TENSORS = 4


def run(params, inputs: dict[str, Path], out_dir: Path, ctx) -> dict[str, float]:
    calib, target_cfg = params.calib, params.target
    method = calib.method.value
    graph = Graph.load(inputs["fold_check"])
    float_graph, ranges = bypass_fake_quant(graph)
    if method == "qat" and not ranges:
        raise CalibrationError(
            "calib.method=qat reads the ranges of the graph's own FakeQuant nodes, and this graph has none "
            f"(a float model); choose one of {', '.join(sorted(m for m in METHODS if m != 'qat'))}"
        )
    layer_graph = group_layers(float_graph)
    dataset = load_split(
        params.data.kind.value, params.data.path, params.data.calib_split, to_plain(params.model.preprocess),
        limit=calib.num_images, holdout_fraction=params.data.holdout_fraction, seed=params.data.split_seed,
    )
    stats = collect_statistics(float_graph, layer_graph.quantized_tensors(), dataset.images, calib.batch_size,
                               calib.num_bins, dataset.source, ctx.progress)
    target = TargetSpec(
        name=target_cfg.name, bits=target_cfg.bits, pow2_scales=target_cfg.pow2_scales,
        per_channel_weights=target_cfg.per_channel_weights, input_log2scale=target_cfg.input_log2scale,
        min_log2scale=target_cfg.min_log2scale, max_log2scale=target_cfg.max_log2scale, pow2_rounding=calib.pow2_rounding.value,
    )
    settings = CalibrationSettings(percentile=calib.percentile, num_quant_levels=2 ** (target.bits - 1))
    table = build_calibration_table(layer_graph, method, target, settings, stats, ranges)
    table.save(out_dir)
    save_histograms(stats, out_dir / HISTOGRAM_DIR)
    for tensor, entry in table.tensors.items():
        for warning in entry.warnings:
            ctx.log(f"warning: {tensor}: {warning}")
    plot_clipping(stats, table, ranges, settings, out_dir / "clipping.png")
    activations = [entry for entry in table.tensors.values() if entry.kind in ("activation", "input")]
    clipped = [entry.clipped_fraction or 0.0 for entry in activations]
    (out_dir / "report.json").write_text(json.dumps({
        "images": len(dataset.images), "source": dataset.source, "method": method, "target": target.name,
        "most_clipped": sorted(((e.clipped_fraction or 0.0, t) for t, e in table.tensors.items()), reverse=True)[:10],
    }, indent=1, sort_keys=True) + "\n")
    return {
        "images": len(dataset.images),
        "tensors": len(activations),
        "clipped_fraction_max": max(clipped),
        "clipped_fraction_mean": float(np.mean(clipped)),
        "zero_range_tensors": sum(1 for entry in activations if entry.threshold == 0.0),
    }


class StatisticsCollector:
    """Observes `tensors` of `graph` batch by batch, reduced inside the graph
    (core/tf_statistics.py): one graph execution per batch, memory constant in the image count."""

    def __init__(self, graph: Graph, tensors: list[str], num_bins: int, source: str):
        self.tensors, self.num_bins, self.source = tensors, num_bins, source
        self.stats = {tensor: TensorStatistics(num_bins) for tensor in tensors}
        self.runner = GraphRunner(graph)
        self.fetches = add_statistics_ops(self.runner, tensors, num_bins)
        self.seen = 0

    def observe(self, images: np.ndarray, batch_size: int) -> None:
        for values in self.runner.batches(self.fetches, images, batch_size):
            for tensor, observed in observations(values, self.tensors, self.num_bins).items():
                bad = ~np.isfinite(observed.per_image_absmax)
                if bad.any():
                    raise CalibrationError(
                        f"calibration image {self.seen + int(np.argmax(bad))} of {self.source}: tensor {tensor} has "
                        f"NaN/Inf values; check the data and the model's preprocessing"
                    )
                self.stats[tensor].merge(observed.statistics)
            self.seen += len(values[0])

    def close(self) -> None:
        self.runner.close()


def collect_statistics(graph: Graph, tensors: list[str], images: np.ndarray, batch_size: int, num_bins: int,
                       source: str, progress) -> dict[str, TensorStatistics]:
    if len(images) == 0:
        raise CalibrationError(f"{source}: the calibration data set is empty")
    collector = StatisticsCollector(graph, tensors, num_bins, source)
    try:
        for start in range(0, len(images), batch_size):
            collector.observe(images[start : start + batch_size], batch_size)
            progress(collector.seen, len(images))
    finally:
        collector.close()
    return collector.stats


def save_histograms(stats: dict[str, TensorStatistics], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    index = {}
    for number, (tensor, tensor_stats) in enumerate(sorted(stats.items())):
        file_name = f"{number:04d}.npy"
        np.save(directory / file_name, tensor_stats.counts)
        index[tensor] = {"file": file_name, **tensor_stats.to_dict()}
    (directory / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")


def plot_clipping(stats, table: CalibrationTable, ranges, settings: CalibrationSettings, path: Path) -> None:
    """For the most clipped tensors: the |x| histogram (log scale) with each method's threshold, as in seed 002."""
    import dataclasses

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranked = sorted((entry.clipped_fraction or 0.0, tensor) for tensor, entry in table.tensors.items() if tensor in stats)
    chosen = [tensor for _, tensor in reversed(ranked[-PLOTTED_TENSORS:])]
    figure, axes = plt.subplots(len(chosen), 1, figsize=(9, 2.6 * len(chosen)), squeeze=False)
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
    figure.savefig(path, dpi=90)
    plt.close(figure)
