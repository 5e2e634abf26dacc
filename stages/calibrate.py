"""calibrate: one streaming pass of the calibration data through the folded float
graph collects min/max/absmax and a histogram of |x| for every tensor the IR
holds in int8; the configured method turns them into thresholds, the target
into scales. A QAT graph is calibrated as the float graph it contains.

Its outputs are the table and the float graph the table is for: the folded graph, or with
calib.equalize the cross-layer equalized one (an equivalent function, measured on the
calibration images), which annotate, emit-IR and simulate quantize. calib.bias_correction
adds a per-channel correction to each bias entry of the table.

What no method choice reaches (the equalized graph, the statistics, the layer-input moments: every
pass of the float graph over the calibration images) is the stage's stored part `observation`,
keyed by the fold_check graph and the data and calibration keys it reads: a sweep of methods, or a
DVC experiment that changes only the method, observes once and each method builds its table from it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.data.datasets import load_split
from core.frontend.fake_quant import QuantRange, bypass_fake_quant
from core.frontend.embedding import check_token_ids, reads_token_ids
from core.frontend.graph import Graph, check_input_shape
from core.frontend.layers import LayerGraph
from core.frontend.tflite import TfliteError
from core.ir.layers import group_layers
from core.limits import BUDGET_KEY, MemoryBudget, check_activations
from core.ir.emit import build_ir
from core.ir.ops import OPS
from core.ir.records import IrError
from core.quantize.auto import AUTO, SearchSetup, search
from core.quantize.calibration.build import (CalibrationError, TargetSpec, build_calibration_table, correct_biases,
                                             qat_range_changes)
from core.quantize.calibration.histogram import TensorStatistics, histogram_bytes, load_histograms, save_histograms
from core.quantize.calibration.methods import (METHODS, CalibrationSettings, clipping_is_deliberate, methods_from_data, options_of,
                                              takes_model_ranges)
from core.quantize.equalize import clamped_layer_inputs, equalize
from core.quantize.schemes import scheme_of
from core.quantize.evaluation import end_point_difference
from core.quantize.statistics import channel_statistics, collect_statistics, load_moments, save_moments
from core.quantize.table import SCHEME_DECIDED, CalibrationTable
from core.reports.calibration import plot_clipping, plot_histograms
from core.reports.series import series_rows, write_series
from core.reports.warnings import summarize
from stages.evaluation import evaluation_split
from pipeline.params import StoredPart, to_plain
from stages.emit_ir import emitted_ir, refuse_untakeable

HISTOGRAM_DIR = "histograms"
MOMENTS_DIR = "moments"
EQUALIZATION_FILE = "equalization.json"
# what the observation (the float graph calibrated, its statistics and layer-input moments) depends on besides the
# fold_check graph, whether it is equalized, whether moments are needed: not the method, its parameters or the target
OBSERVATION_KEYS = ("calib.num_images", "calib.batch_size", "calib.num_bins", "data", "model.preprocess", "limits")
EQUIVALENCE_IMAGES = 64  # calibration images the equalized graph is checked on against the folded one
# calib.equalize_relu6=keep: the input magnitudes a kept ReLU6's bound assumes, as a multiple of the
# largest seen per channel in calibration (ssd_mbv2, held-out image: end-point SQNR of the equalized
# float graph 18.6 dB at 1x, 21.9 dB at 2x, 23.0 dB at 4x; the depthwise outliers equalize alike)
INPUT_HEADROOM = 2.0


@dataclass(frozen=True)
class PostTraining:
    """The post-training steps a run takes, in their order, decided once from calib: a method whose range is the
    model's own (`range_from_model`: qat) keeps the trained graph and its ranges, so neither equalization nor bias
    correction applies to it."""

    equalize: bool  # 1. cross-layer equalization of the float graph, before its statistics are observed
    moments: bool  # 2. the layer inputs' per-channel moments, observed with the statistics (3's means, mse weights' mean squares)
    # (the threshold method, or auto's search over the registry's, chooses the table here)
    correct_biases: bool  # 3. each bias corrected for the mean shift its layer's weight quantization causes

    @classmethod
    def of(cls, calib) -> "PostTraining":
        trained = takes_model_ranges(calib.method.value)
        return cls(equalize=bool(calib.equalize) and not trained,
                   moments=(bool(calib.bias_correction) and not trained) or calib.weight_method.value == "mse",
                   correct_biases=bool(calib.bias_correction) and not trained)


@dataclass(frozen=True)
class Observation:
    """What the calibration images showed of the float graph the table is for (the stored part `observation`)."""

    float_graph: Graph
    layer_graph: LayerGraph
    stats: dict[str, TensorStatistics]
    input_moments: dict[str, dict[str, np.ndarray]]  # per weighted layer's input: per-channel mean, mean square
    equalization: dict | None  # what cross-layer equalization did, when the graph was equalized

    def metrics(self) -> dict[str, float]:
        if self.equalization is None:
            return {}
        return {"equalized_pairs": len(self.equalization["pairs"]),
                "equalize_max_abs_diff": self.equalization["difference"]["max_abs_difference"]}


@dataclass(frozen=True)
class TableSetup:
    """What choosing the table takes besides the observation: the config, the target's scheme, the methods'
    settings, the model's own ranges (a QAT graph's), the calibration images and the batch size that fits."""

    params: Any
    target: TargetSpec
    settings: CalibrationSettings
    ranges: dict[str, QuantRange]
    images: np.ndarray
    batch: int


@dataclass(frozen=True)
class Calibrated:
    """The table, what chose and corrected it (report.json's `auto` and `bias_correction`) and its metrics."""

    table: CalibrationTable
    report: dict[str, Any]
    metrics: dict[str, float]


def run(params, inputs: dict[str, Path], out_dir: Path, ctx) -> dict[str, float]:
    calib = params.calib
    method = calib.method.value
    graph = Graph.load(inputs["fold_check"])
    float_graph, ranges = bypass_fake_quant(graph)
    if takes_model_ranges(method) and not ranges:
        raise CalibrationError(
            f"calib.method={method} reads the ranges of the graph's own {METHODS[method].model_ranges} nodes, and this graph has none "
            f"(a float model); choose one of {', '.join(methods_from_data())}"
        )
    layer_graph = group_layers(float_graph)
    refuse_untakeable(params.target, layer_graph)
    dataset, batch = _calibration_data(params, float_graph, len(layer_graph.quantized_tensors()), ctx)
    observation = _observed(calib, float_graph, layer_graph, dataset, batch, ctx)
    target = target_spec(params.target, calib)
    settings = CalibrationSettings(options=options_of(calib), num_quant_levels=2 ** (target.bits - 1),
                                   weight_method=calib.weight_method.value)
    calibrated = _table(TableSetup(params, target, settings, ranges, dataset.images, batch), observation, ctx)
    table, layer_graph, stats = calibrated.table, observation.layer_graph, observation.stats
    check_emittable(params, layer_graph, table)
    report = {**({"equalization": observation.equalization} if observation.equalization is not None else {}), **calibrated.report}
    table.save(out_dir)
    observation.float_graph.save(out_dir)
    save_histograms(stats, out_dir / HISTOGRAM_DIR)
    warnings = [(tensor, warning) for tensor, entry in table.tensors.items() for warning in entry.warnings]
    for line in summarize(warnings):
        ctx.log(f"warning: {line}")
    changes = qat_range_changes(table, layer_graph, ranges) if takes_model_ranges(method) else []
    for line in summarize([(change["tensor"], f"({change['kind']}) {change['why']}") for change in changes]):
        ctx.log(f"qat range changed: {line} (every range: report.json's qat_range_changes)")
    activations = _pictures_and_series(stats, table, ranges, settings, out_dir, params.pictures)
    clipped = [entry.clipped_fraction or 0.0 for entry in activations.values()]
    span = input_span(table, stats)
    (out_dir / "report.json").write_text(json.dumps({
        "images": len(dataset.images), "source": dataset.source, "method": method, "target": target.name,
        "most_clipped": sorted(((e.clipped_fraction or 0.0, t) for t, e in table.tensors.items()), reverse=True)[:10],
        # what the quality guard reads (pipeline/quality.py): the activations, the input among them, a method clips
        "most_clipped_activations": sorted(([entry.clipped_fraction or 0.0, tensor, entry.kind, entry.method,
                                             clipping_is_deliberate(entry.method) or entry.method in SCHEME_DECIDED]
                                            for tensor, entry in activations.items()), reverse=True)[:10],
        **({"qat_range_changes": changes} if changes else {}), **({"input_span": span} if span else {}), **report,
        "warnings": [{"tensor": tensor, "warning": warning} for tensor, warning in warnings],
    }, indent=1, sort_keys=True) + "\n")
    return {
        **observation.metrics(),
        **calibrated.metrics,
        "images": len(dataset.images),
        "tensors": len(activations),
        "clipped_fraction_max": max(clipped),
        "clipped_fraction_mean": float(np.mean(clipped)),
        "zero_range_tensors": sum(1 for entry in activations.values() if entry.threshold == 0.0),
        **({"input_levels": span["levels"]} if span else {}),
    }


def check_emittable(params, layer_graph, table) -> None:
    """The IR's representability checks (shift ranges, int8 constants, int32 biases and sums), made on the table here
    rather than by emit_ir after annotate: a table the IR cannot hold is refused before any later stage runs."""
    try:
        emitted_ir(params, layer_graph, table, runtime=None)
    except (IrError, TfliteError) as error:
        raise CalibrationError(f"the calibration table cannot be emitted as the target's IR: {error}") from None


def input_span(table, stats) -> dict | None:
    """How many of the network input's quantization steps the calibration data span: a fixed input range
    (a .tflite's or QAT graph's own, target.scheme.input_log2scale) that the preprocessed data barely move in
    leaves the model a few levels of its input, and no clipping to show for it."""
    entries = [(tensor, entry) for tensor, entry in table.tensors.items() if entry.kind == "input" and tensor in stats]
    if not entries:
        return None
    tensor, entry = entries[0]
    observed = stats[tensor]
    step = entry.grid.step
    low, high = max(float(observed.min), entry.range[0]), min(float(observed.max), entry.range[1])
    return {"tensor": tensor, "levels": max(high - low, 0.0) / step, "data": [float(observed.min), float(observed.max)],
            "range": list(entry.range)}


def _calibration_data(params, float_graph: Graph, tensors: int, ctx):
    """(the calibration images, the batch size that fits the budget); what the histograms of `tensors` tensors
    take is checked first."""
    calib = params.calib
    budget = MemoryBudget(params.limits.memory_mb)
    budget.check(f"calib.num_bins={calib.num_bins}: the histograms of {tensors} tensors",
                 histogram_bytes(calib.num_bins, tensors), lower="calib.num_bins (2048 is what the methods are tuned for)")
    dataset = load_split(
        params.data.kind.value, params.data.path, params.data.calib_split, to_plain(params.model.preprocess),
        limit=calib.num_images, holdout_fraction=params.data.holdout_fraction, seed=params.data.split_seed, budget=budget,
    )
    check_input_shape(dataset.images, float_graph, "data.calib_split")
    check_token_ids(dataset.images, float_graph, "data.calib_split")
    if reads_token_ids(float_graph):  # annotate checks the evaluation's ids too; here a wrong one stops the run two stages sooner
        check_token_ids(evaluation_split(params, budget).images, float_graph, "data.eval_split")
    if len(dataset.images) < calib.num_images:
        ctx.log(f"calib.num_images={calib.num_images}, but {dataset.source} holds {len(dataset.images)}: calibrating on all "
                f"{len(dataset.images)}")
    # two batches in memory: the graph computing one while the previous one's histograms are counted
    batch = budget.batch_size(calib.batch_size, 2 * check_activations(budget, float_graph.activation_bytes(), "calibrate"),
                              "calibration")
    if batch < calib.batch_size:
        ctx.log(f"calibrating in batches of {batch} images, not calib.batch_size={calib.batch_size}: {BUDGET_KEY} holds no more")
    return dataset, batch


def _observed(calib, float_graph: Graph, layer_graph, dataset, batch: int, ctx) -> Observation:
    """The store's observation part, computed when absent: a sweep of methods observes once."""
    method, steps = calib.method.value, PostTraining.of(calib)
    if takes_model_ranges(method) and (calib.equalize or calib.bias_correction):
        ctx.log(f"calib.method={method} keeps the trained graph and its ranges: calib.equalize and calib.bias_correction do not apply")
    equalized, moments = steps.equalize, steps.moments
    part = StoredPart("observation", OBSERVATION_KEYS + (("calib.equalize_relu6",) if equalized else ()), ("fold_check",),
                      (("equalize", equalized), ("moments", moments)))
    directory = ctx.reuse(part, lambda build: observe(float_graph, layer_graph, calib, dataset, batch, equalized, moments, build, ctx))
    float_graph, stats, input_moments, equalization = load_observation(directory)
    if equalized:
        _log_equalization(equalization, min(len(dataset.images), EQUIVALENCE_IMAGES), ctx)
    return Observation(float_graph, group_layers(float_graph), stats, input_moments, equalization if equalized else None)


def _pictures_and_series(stats, table, ranges, settings, out_dir: Path, pictures: bool) -> dict:
    """clipping.png and histograms.png (where pictures are drawn) and the clipping series; the activation entries, by
    tensor."""
    if pictures:
        plot_clipping(stats, table, ranges, settings, out_dir / "clipping.png")
        plot_histograms(stats, table, out_dir / "histograms.png")
    activations = {tensor: entry for tensor, entry in table.tensors.items() if entry.kind in ("activation", "input")}
    write_series(out_dir, "clipping", series_rows("tensor_index", "tensor", {
        "clipped_fraction": {tensor: entry.clipped_fraction or 0.0 for tensor, entry in activations.items()},
        "threshold": {tensor: entry.threshold for tensor, entry in activations.items()}}))
    return activations


def target_spec(target_cfg, calib) -> TargetSpec:
    return TargetSpec(target_cfg.name, scheme_of(target_cfg, calib.pow2_rounding.value))


def _table(setup: TableSetup, observation: Observation, ctx) -> Calibrated:
    """The method's table (or auto's search), bias-corrected as configured."""
    calib, layer_graph, moments = setup.params.calib, observation.layer_graph, observation.input_moments
    method = calib.method.value
    correct, weigh = PostTraining.of(calib).correct_biases, setup.settings.weight_method == "mse"
    means = {tensor: values["mean"] for tensor, values in moments.items()} if correct else None
    mean_squares = {tensor: values["mean_square"] for tensor, values in moments.items()} if weigh else None
    report, metrics = {}, {}
    if method == AUTO:
        search_setup = _search_setup(setup, observation, means, mean_squares)
        table, report["auto"] = _searched(search_setup, calib.auto, setup.images, setup.batch, ctx)
        metrics.update(auto_sqnr_db=report["auto"]["sqnr_db"], auto_evaluations=report["auto"]["evaluations"])
    else:
        table = build_calibration_table(layer_graph, method, setup.target, setup.settings, observation.stats, setup.ranges,
                                        mean_squares, float_layers(layer_graph, calib.keep_float))
    if means is not None:
        report["bias_correction"] = correct_biases(table, layer_graph, setup.target, means)
        metrics["bias_corrected_layers"] = len(report["bias_correction"])
    return Calibrated(table, report, metrics)


def _input_moments(layer_graph, images, batch: int) -> dict[str, dict[str, np.ndarray]]:
    """Per-channel statistics of each weighted layer's input: bias correction reads the means,
    weight_method=mse the mean squares."""
    inputs = [layer.inputs[0] for layer in layer_graph.layers if layer.rule.weight and layer.weight]
    return channel_statistics(layer_graph.graph, inputs, images, batch)


def float_layers(layer_graph, names) -> list[str]:
    """calib.keep_float's layers by their graph names, each given by its graph or IR name, or by the
    Keras layer name a graph name holds as one of its parts ("dw" for "model_1/dw_1/depthwise"),
    when exactly one layer does; each one an operation with a float variant; else a
    CalibrationError naming it and what it could be."""
    candidates = [layer for layer in layer_graph.layers if OPS[layer.op].float_variant]
    chosen = []
    for name in names:
        matches = [layer for layer in layer_graph.layers if name in (layer.name, layer.ir_name)] or \
                  [layer for layer in layer_graph.layers if any(re.fullmatch(rf"{re.escape(name)}(_\d+)?", part) for part in layer.name.split("/"))]
        if len(matches) != 1 or matches[0] not in candidates:
            why = ("no such layer" if not matches else f"it names {len(matches)} layers" if len(matches) > 1
                   else f"a {matches[0].op} layer has no float variant")
            raise CalibrationError(f"calib.keep_float: {name!r}: {why}; the layers that can be kept in float are "
                                   f"{', '.join(layer.name for layer in candidates[:8])}{' ...' if len(candidates) > 8 else ''} "
                                   "(conv, dwconv and dense layers; sensitivity.json ranks them)")
        chosen.append(matches[0].name)
    return sorted(set(chosen))


def _search_setup(setup: TableSetup, observation: Observation, means, mean_squares) -> SearchSetup:
    params, layer_graph, target, settings, stats = setup.params, observation.layer_graph, setup.target, setup.settings, observation.stats
    kept = float_layers(layer_graph, params.calib.keep_float)

    def make_table(method: str):
        table = build_calibration_table(layer_graph, method, target, settings, stats, {}, mean_squares, kept)
        correct_biases(table, layer_graph, target, means)
        return table

    def emit_error(table) -> str | None:  # the TF2IR IR's own checks (shift ranges): what emit_ir would refuse
        if not target.scheme.power_of_two:
            return None
        try:
            build_ir(layer_graph, table, params.target.scheme.min_shift, params.target.scheme.max_shift)
        except IrError as error:
            return str(error)
        return None

    return SearchSetup(layer_graph, target, settings, stats, make_table,
                       lambda table: correct_biases(table, layer_graph, target, means), emit_error,
                       params.calib.auto.max_clipped_fraction)


def _searched(setup: SearchSetup, auto, images, batch: int, ctx):
    result = search(setup, [method.value for method in auto.methods], images[:auto.num_images], batch, auto.budget_s, ctx.progress)
    scores = ", ".join(f"{name} {'cannot be emitted' if value is None else f'{value:.2f} dB'}" for name, value in result.method_sqnr_db.items())
    ctx.log(f"auto: whole tables: {scores}; from {result.start_method}, {len(result.moves)} move(s) in {result.evaluations} "
            f"evaluations ({result.seconds:.0f} s) -> {result.sqnr_db:.2f} dB end-point SQNR on {min(len(images), auto.num_images)} "
            "calibration images")
    if result.stopped_early:
        ctx.log(f"warning: auto stopped at calib.auto.budget_s={auto.budget_s:g} s before trying every candidate; "
                "the table is the best found")
    return result.table, result.to_dict()


def _equalized(float_graph: Graph, layer_graph, calib, images, batch: int, ctx):
    """(the equalized graph, its layers, what equalization did and how far it moved the end points)."""
    relu6 = calib.equalize_relu6.value
    input_absmax = {}
    if relu6 == "keep":
        clamped = clamped_layer_inputs(layer_graph)
        observed = channel_statistics(float_graph, list(clamped.values()), images, batch)
        input_absmax = {layer: observed[tensor]["absmax"] * INPUT_HEADROOM for layer, tensor in clamped.items()}
    equalization = equalize(layer_graph, relu6, input_absmax)
    difference = end_point_difference(float_graph, equalization.graph, images[:EQUIVALENCE_IMAGES], batch)
    return equalization.graph, group_layers(equalization.graph), {**equalization.to_dict(), "difference": difference}


def _log_equalization(report: dict, images: int, ctx) -> None:
    difference = report["difference"]
    ctx.log(f"equalized {len(report['pairs'])} layer pair(s) in {report['passes']} pass(es); the float end points moved by "
            f"at most {difference['max_abs_difference']:.3g} (largest value {difference['max_abs_reference']:.3g}, "
            f"SQNR {difference['sqnr_db_min']:.1f} dB) on {images} calibration images")
    if not report["converged"]:
        ctx.log(f"warning: equalization stopped after {report['passes']} passes before every scale settled")


def observe(float_graph: Graph, layer_graph, calib, dataset, batch: int, equalized: bool, moments: bool, directory: Path,
            ctx) -> None:
    """The method-independent part of calibration, written to `directory`: the float graph the table is for
    (equalized when asked), the statistics of its quantized tensors and, when asked, its layer-input moments."""
    report = {}
    if equalized:
        float_graph, layer_graph, report = _equalized(float_graph, layer_graph, calib, dataset.images, batch, ctx)
    stats = collect_statistics(float_graph, layer_graph.quantized_tensors(), dataset.images, batch,
                               calib.num_bins, dataset.source, ctx.progress)
    float_graph.save(directory / "graph")
    save_histograms(stats, directory / HISTOGRAM_DIR)
    save_moments(_input_moments(layer_graph, dataset.images, batch) if moments else {}, directory / MOMENTS_DIR)
    (directory / EQUALIZATION_FILE).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")


def load_observation(directory: Path) -> tuple[Graph, dict[str, TensorStatistics], dict[str, dict[str, np.ndarray]], dict]:
    """What `observe` wrote: (float graph, statistics, moments, the equalization report or {})."""
    return (Graph.load(directory / "graph"), load_histograms(directory / HISTOGRAM_DIR), load_moments(directory / MOMENTS_DIR),
            json.loads((directory / EQUALIZATION_FILE).read_text()))
