"""annotate: simulated quantization (FakeQuant ops, placed by the per-op rules of
seed 001 and driven by the calibration table) in a graph TensorFlow executes,
and what it costs against the float graph on the evaluation data. Both graphs' end points on
those images are kept (end_points/, when they are small) for simulate, which compares the
integers with them instead of running the two graphs again."""

from __future__ import annotations

import json
import math
from pathlib import Path

from core.frontend.fake_quant import bypass_fake_quant
from core.frontend.embedding import check_token_ids
from core.frontend.graph import Graph, check_input_shape
from core.ir.layers import group_layers
from core.limits import MemoryBudget, check_activations, human_bytes
from core.quantize.annotate import annotate_graph, export_frozen_graph
from core.frontend.tf_runtime import DEFAULT_BATCH_SIZE
from core.quantize.evaluation import EndPointRecorder, class_labels, compare, layer_tensor_pairs, top1
from core.quantize.table import CalibrationTable
from core.quantize import sensitivity
from core.reports.layers import plot_layer_sqnr, plot_sensitivity
from core.reports.series import series_rows, write_series
from stages.evaluation import evaluation_split
from pipeline.params import StoredPart, Task

ANNOTATED_FILE = "annotated.pb"
QAT_GRAPH_FILE = "qat_graph.json"
# both graphs' end points on the evaluation images are kept for simulate up to this size (mbv1_cifar10: 68 KiB; SSD
# MobileNet-v2: 1.4 MiB an image)
END_POINTS_KEPT_BYTES = 64 << 20
QAT_GRAPH_TOP1 = StoredPart("qat_graph_top1", ("data", "model.preprocess", "model.task", "model.num_classes", "limits"), ("fold_check",))


def run(params, inputs: dict[str, Path], out_dir: Path, ctx) -> dict[str, float]:
    graph = Graph.load(inputs["fold_check"])
    table = CalibrationTable.load(inputs["calibrate"])
    reference, ranges = bypass_fake_quant(graph)
    float_graph = Graph.load(inputs["calibrate"])  # what the table quantizes: the folded graph, or its equalized twin
    layer_graph = group_layers(float_graph)
    annotated = annotate_graph(layer_graph, table)
    annotated.save(out_dir)
    export_frozen_graph(annotated, out_dir / ANNOTATED_FILE)

    budget = MemoryBudget(params.limits.memory_mb)
    evaluation = evaluation_split(params, budget)
    check_input_shape(evaluation.images, float_graph, "data.eval_split")
    check_token_ids(evaluation.images, float_graph, "data.eval_split")
    # the float and the annotated graph (and an equalized graph's original) run each batch side by side
    side_by_side = 3 if float_graph.source.get("equalized") else 2
    batch = budget.batch_size(DEFAULT_BATCH_SIZE, side_by_side * check_activations(budget, annotated.activation_bytes(), "annotate"),
                              "the evaluation")
    labels, why_not = class_labels(float_graph, evaluation.labels if params.model.task is Task.classification else None,
                                   params.model.num_classes)
    if why_not:
        ctx.log(why_not)
    ctx.log(f"evaluating float vs annotated on {len(evaluation.images)} images of {evaluation.source}")
    recorder = EndPointRecorder(min(END_POINTS_KEPT_BYTES, budget.bytes // 4))
    comparison = compare(float_graph, annotated, layer_tensor_pairs(layer_graph, annotated), evaluation.images, labels, batch,
                         reference=reference if float_graph.source.get("equalized") else None, record=recorder)
    if not recorder.save(out_dir, evaluation.images.content):
        ctx.log(f"the end points of {len(evaluation.images)} images take {human_bytes(recorder.bytes)}: not kept (over "
                f"{human_bytes(recorder.limit_bytes)}); simulate runs the float and annotated graphs again")
    report = comparison.to_dict()
    # execution order matters to a reader; the JSON writer sorts object keys
    report["per_layer_sqnr_db"] = [[layer, value] for layer, value in comparison.per_layer_sqnr_db.items()]
    metrics = _metrics(comparison)
    if ranges and labels is not None:  # a QAT graph: its own top-1, the figure a user knows it by
        metrics["top1_qat_graph"] = report["top1_qat_graph"] = _qat_graph_top1(graph, evaluation.images, labels, budget, ctx)
    if params.sensitivity.enabled:
        report["sensitivity"] = _sensitivity(params.sensitivity, layer_graph, table, reference, evaluation.images, batch, out_dir, ctx,
                                             params.pictures)
        metrics["sensitivity_sqnr_db_min"] = min(item["only_this_sqnr_db"] for item in report["sensitivity"])
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    if params.pictures:
        plot_layer_sqnr(comparison.per_layer_sqnr_db, out_dir / "layer_sqnr.png",
                        f"float vs annotated ({table.method}, {table.target}): SQNR per layer output")
    write_series(out_dir, "layer_sqnr", series_rows("layer_index", "layer", {"sqnr_db": comparison.per_layer_sqnr_db}))
    return metrics


def _qat_graph_top1(graph: Graph, images, labels, budget: MemoryBudget, ctx) -> float:
    """The QAT graph's own top-1 on the evaluation data: no calibration choice reaches it, so it is a stored
    part (a sweep of methods runs the QAT graph once)."""
    def compute(directory: Path) -> None:
        batch = budget.batch_size(DEFAULT_BATCH_SIZE, check_activations(budget, graph.activation_bytes(), "annotate"), "the evaluation")
        (directory / QAT_GRAPH_FILE).write_text(json.dumps({"top1": top1(graph, images, labels, batch), "images": len(images)}) + "\n")

    directory = ctx.reuse(QAT_GRAPH_TOP1, compute)
    return float(json.loads((directory / QAT_GRAPH_FILE).read_text())["top1"])


def _sensitivity(settings, layer_graph, table, reference, images, batch: int, out_dir: Path, ctx, pictures: bool) -> list[dict]:
    """The ranked per-layer table (most sensitive first), sensitivity.json and (where pictures are drawn) sensitivity.png."""
    images = images[: settings.num_images]
    ctx.log(f"sensitivity: two annotated variants per layer on {len(images)} images")
    results = sensitivity.analyze(layer_graph, table, reference, images, batch, ctx.progress)
    table_rows = [item.to_dict() for item in sensitivity.ranked(results)]
    (out_dir / "sensitivity.json").write_text(json.dumps(table_rows, indent=1) + "\n")
    columns = {"only_this_sqnr_db": {item.layer: item.only_this_sqnr_db for item in results},
               "all_but_this_sqnr_db": {item.layer: item.all_but_this_sqnr_db for item in results}}
    if pictures:
        plot_sensitivity(columns["only_this_sqnr_db"], columns["all_but_this_sqnr_db"],
                         out_dir / "sensitivity.png", f"per-layer sensitivity ({table.method}, {table.target}, {len(images)} images)")
    write_series(out_dir, "sensitivity", series_rows("layer_index", "layer", columns))
    for row in table_rows[:5]:
        ctx.log(f"  {row['only_this_sqnr_db']:6.1f} dB only / {row['all_but_this_sqnr_db']:6.1f} dB all but: {row['layer']}")
    return table_rows


def _metrics(comparison) -> dict[str, float]:
    metrics: dict[str, float] = {"images": comparison.num_images}
    if comparison.top1_float is not None:
        metrics.update(top1_float=comparison.top1_float, top1=comparison.top1_annotated, top1_agreement=comparison.top1_agreement)
    end_point_sqnr = [item.sqnr_db for item in comparison.end_points]
    metrics["sqnr_db_min"] = min(end_point_sqnr)
    metrics["cosine_min"] = min(item.cosine for item in comparison.end_points)
    for index, item in enumerate(comparison.end_points):
        metrics[f"sqnr_db.end_point_{index}"] = item.sqnr_db
        metrics[f"cosine.end_point_{index}"] = item.cosine
    layer_sqnr = [value for value in comparison.per_layer_sqnr_db.values() if math.isfinite(value)]
    metrics["layer_sqnr_db_min"] = min(layer_sqnr)
    metrics["layer_sqnr_db_mean"] = sum(layer_sqnr) / len(layer_sqnr)
    return metrics
