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
    summary = _run(*workspace, "calib.method=kl")
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
    assert round_trip_table.tensors == original_table.tensors
    assert second.metrics["annotate.top1"] == first.metrics["annotate.top1"]
