"""calibrate: one streaming pass of the calibration data through the folded float
graph collects min/max/absmax and a histogram of |x| for every tensor the IR
holds in int8; the configured method turns them into thresholds, the target
into scales. A QAT graph is calibrated as the float graph it contains."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from core.data.datasets import load_split
from core.frontend.fake_quant import bypass_fake_quant
from core.frontend.graph import Graph
from core.ir.layers import group_layers
from core.limits import BUDGET_KEY, MemoryBudget, check_activations
from core.quantize.calibration.build import CalibrationError, TargetSpec, build_calibration_table, qat_range_changes
from core.quantize.calibration.histogram import TensorStatistics
from core.quantize.calibration.methods import METHODS, CalibrationSettings
from core.quantize.statistics import collect_statistics
from core.reports.calibration import plot_clipping
from pipeline.params import to_plain

HISTOGRAM_DIR = "histograms"


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
    budget = MemoryBudget(params.limits.memory_mb)
    dataset = load_split(
        params.data.kind.value, params.data.path, params.data.calib_split, to_plain(params.model.preprocess),
        limit=calib.num_images, holdout_fraction=params.data.holdout_fraction, seed=params.data.split_seed, budget=budget,
    )
    batch = budget.batch_size(calib.batch_size, check_activations(budget, float_graph.activation_bytes(), "calibrate"),
                              "calibration")
    if batch < calib.batch_size:
        ctx.log(f"calibrating in batches of {batch} images, not calib.batch_size={calib.batch_size}: {BUDGET_KEY} holds no more")
    stats = collect_statistics(float_graph, layer_graph.quantized_tensors(), dataset.images, batch,
                               calib.num_bins, dataset.source, ctx.progress)
    target = TargetSpec(
        name=target_cfg.name, bits=target_cfg.bits, pow2_scales=target_cfg.pow2_scales,
        per_channel_weights=target_cfg.per_channel_weights, input_log2scale=target_cfg.input_log2scale,
        min_log2scale=target_cfg.min_log2scale, max_log2scale=target_cfg.max_log2scale, pow2_rounding=calib.pow2_rounding.value,
    )
    settings = CalibrationSettings(percentile=calib.percentile, num_quant_levels=2 ** (target.bits - 1),
                                   weight_method=calib.weight_method.value)
    table = build_calibration_table(layer_graph, method, target, settings, stats, ranges)
    table.save(out_dir)
    save_histograms(stats, out_dir / HISTOGRAM_DIR)
    for tensor, entry in table.tensors.items():
        for warning in entry.warnings:
            ctx.log(f"warning: {tensor}: {warning}")
    changes = qat_range_changes(table, layer_graph, ranges) if method == "qat" else []
    for change in changes:
        ctx.log(f"qat range changed: {change['tensor']} ({change['kind']}) {change['qat_range']} -> {change['range']}: {change['why']}")
    plot_clipping(stats, table, ranges, settings, out_dir / "clipping.png")
    activations = [entry for entry in table.tensors.values() if entry.kind in ("activation", "input")]
    clipped = [entry.clipped_fraction or 0.0 for entry in activations]
    (out_dir / "report.json").write_text(json.dumps({
        "images": len(dataset.images), "source": dataset.source, "method": method, "target": target.name,
        "most_clipped": sorted(((e.clipped_fraction or 0.0, t) for t, e in table.tensors.items()), reverse=True)[:10],
        **({"qat_range_changes": changes} if changes else {}),
    }, indent=1, sort_keys=True) + "\n")
    return {
        "images": len(dataset.images),
        "tensors": len(activations),
        "clipped_fraction_max": max(clipped),
        "clipped_fraction_mean": float(np.mean(clipped)),
        "zero_range_tensors": sum(1 for entry in activations if entry.threshold == 0.0),
    }


def save_histograms(stats: dict[str, TensorStatistics], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    index = {}
    for number, (tensor, tensor_stats) in enumerate(sorted(stats.items())):
        file_name = f"{number:04d}.npy"
        np.save(directory / file_name, tensor_stats.counts)
        index[tensor] = {"file": file_name, **tensor_stats.to_dict()}
    (directory / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
