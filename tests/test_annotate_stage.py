"""The annotate stage as a user runs it: metrics, plots, the exported graph, and
the QAT round trip (annotated file re-imported with calib.method=qat gives the
same calibration table)."""

from __future__ import annotations

import os

import pytest
from rich.console import Console

from conftest import CIFAR10_DIR, compose
from core.quantize.table import CalibrationTable
from pipeline.main import run_pipeline

QUIET = Console(file=open(os.devnull, "w"))


def _run(*overrides):
    return run_pipeline(compose(*overrides, "until=annotate"), console=QUIET)


def _artifact(summary, stage):
    return next(result.artifact for result in summary.results if result.stage.name == stage)


def test_digits_annotation_reports_accuracy_sqnr_and_a_plot(workspace):
    summary = _run(*workspace, "calib.method=kl", "pictures=true")
    metrics = summary.metrics
    assert 0.9 <= metrics["annotate.top1_float"] <= 1.0 and 0.0 <= metrics["annotate.top1"] <= 1.0
    assert metrics["annotate.top1_float"] == pytest.approx(metrics["import.float_accuracy"])  # same held-out split
    assert 10.0 < metrics["annotate.sqnr_db_min"] < 200.0
    assert -1.0 <= metrics["annotate.cosine_min"] <= 1.0
    directory = _artifact(summary, "annotate").directory
    assert (directory / "annotated.pb").stat().st_size > 1000 and (directory / "layer_sqnr.png").stat().st_size > 5000


def test_qat_annotation_reproduces_the_qat_graph_and_round_trips(workspace, tmp_path):
    common = [f"data.path={CIFAR10_DIR}", "calib.method=qat", "calib.num_images=16", "data.eval_num_images=64", *workspace]
    first = _run("model=mbv1_cifar10", *common)
    # the QAT graph takes a float input; the annotated graph, like the IR, its int8 rounding (log2scale 7)
    assert abs(first.metrics["annotate.top1"] - first.metrics["annotate.top1_qat_graph"]) <= 2 / 64

    exported = _artifact(first, "annotate").directory / "annotated.pb"
    end_point = "MobilenetV1/Dense/add_fold/act_quant/FakeQuantWithMinMaxVars:0"
    second = _run("model=mbv1_cifar10", f"model.file.path={exported}", "model.file.sha256=null",
                  f"model.end_points=[{end_point}]", *common)
    original_table = CalibrationTable.load(_artifact(first, "calibrate").directory)
    round_trip_table = CalibrationTable.load(_artifact(second, "calibrate").directory)
    # the QAT graph has no FakeQuant on its input (calibrated from the data); the annotated graph has one, at that range
    original_input, round_trip_input = (table.tensors.pop("images:0") for table in (original_table, round_trip_table))
    assert (original_input.method, round_trip_input.method) == ("minmax", "qat")
    assert (round_trip_input.range, round_trip_input.log2scale) == (original_input.range, original_input.log2scale) == ([-1.0, 127 / 128], 7)
    assert round_trip_table.tensors == original_table.tensors
    assert second.metrics["annotate.top1"] == first.metrics["annotate.top1"]


def test_the_qat_graphs_own_top1_is_one_stored_part_for_every_calibration(workspace):
    import numpy as np
    import tensorflow as tf

    from conftest import MODELS
    from core.data.datasets import load_split

    common = ["model=mbv1_cifar10", f"data.path={CIFAR10_DIR}", "calib.num_images=16", "data.eval_num_images=64", *workspace]
    runs = [_run(*common, f"calib.method={method}") for method in ("qat", "minmax")]
    fewer = _run(*common, "calib.method=minmax", "data.eval_num_images=32")

    def part(summary):
        return _artifact(summary, "annotate").manifest["parts"]["annotate.qat_graph_top1"]["key"]

    assert part(runs[0]) == part(runs[1]) != part(fewer)
    # the figure, independently: TensorFlow on the model file as shipped, on the same evaluation images
    cfg = compose(*common)
    data = cfg.data
    evaluation = load_split(data.kind.value, data.path, data.eval_split, {"size": [128, 128], "channels": 3, "resize": "tf_bilinear",
                                                                          "scale": 127.5, "offset": -1.0},
                            limit=data.eval_num_images, holdout_fraction=data.holdout_fraction, seed=data.split_seed)
    images = np.asarray(evaluation.images)  # decoded and resized eagerly, before a graph is the default
    graph_def = tf.compat.v1.GraphDef.FromString((MODELS / "mobilenet_v1_0.5_128_cifar10" / "graph.pb").read_bytes())
    with tf.Graph().as_default() as graph:
        tf.compat.v1.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as session:
            logits = session.run(cfg.model.end_points[0], {cfg.model.input_tensor: images})
    expected = float(np.mean(logits.reshape(len(logits), -1).argmax(axis=1) == evaluation.labels))
    assert runs[0].metrics["annotate.top1_qat_graph"] == runs[1].metrics["annotate.top1_qat_graph"] == pytest.approx(expected, abs=1 / 64)


def test_simulate_takes_the_end_points_annotate_kept_and_reports_what_running_both_graphs_gives(workspace, tmp_path, monkeypatch):
    """annotate keeps both graphs' end points on the evaluation images (what TensorFlow computes from its
    annotated.pb on those images); simulate's report from them is byte-identical to that of a run whose
    annotate kept none (over the limit), where simulate runs the float and annotated graphs itself."""
    import numpy as np
    import tensorflow as tf

    import stages.annotate
    from core.data.datasets import load_split
    from core.frontend.graph import Graph
    from core.quantize.evaluation import END_POINTS_DIR
    from pipeline.params import to_plain

    kept = run_pipeline(compose(*workspace, "until=simulate"), console=QUIET)
    annotate_dir = _artifact(kept, "annotate").directory
    cfg, data = compose(*workspace), compose(*workspace).data
    images = load_split(data.kind.value, data.path, data.eval_split, to_plain(cfg.model.preprocess), limit=data.eval_num_images,
                        holdout_fraction=data.holdout_fraction, seed=data.split_seed).images
    graph_def = tf.compat.v1.GraphDef.FromString((annotate_dir / "annotated.pb").read_bytes())
    annotated = np.load(annotate_dir / END_POINTS_DIR / "annotated_0.npy", allow_pickle=False)
    with tf.Graph().as_default() as graph:
        tf.compat.v1.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as session:
            names = Graph.load(annotate_dir)  # the exported graph's input and end point
            expected = session.run(names.end_points[0], {names.input_tensor: np.asarray(images)})
    assert annotated.shape == expected.shape and np.array_equal(annotated, expected)

    monkeypatch.setattr(stages.annotate, "END_POINTS_KEPT_BYTES", 0)
    store = [f"store.url={tmp_path / 'other_store'}", f"tracking_uri=sqlite:///{tmp_path / 'other.db'}"]
    recomputed = run_pipeline(compose(*workspace, *store, "until=simulate"), console=QUIET)
    assert not (_artifact(recomputed, "annotate").directory / END_POINTS_DIR).exists()
    reports = [(_artifact(summary, "simulate").directory / "report.json").read_bytes() for summary in (kept, recomputed)]
    assert reports[0] == reports[1]
    assert kept.metrics["simulate.top1_annotated"] == kept.metrics["annotate.top1"]
