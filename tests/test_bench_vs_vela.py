"""bench/bench_vs_vela.py as a user runs it: Arm's Vela (the vela extra, installed with the tests) and our compiler on
MLCommons' anomaly-detection file, the table written with Vela's figures read from its own CSV files and ours bit-exact."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MODELS, PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "bench"))  # a benchmark script, not a package
from bench_vs_vela import VELA_ARGS, vela_layers  # noqa: E402


def test_the_vela_benchmark_compiles_with_both_and_writes_the_side_by_side_tables(tmp_path):
    if not (MODELS / "mlperf_tiny_ad" / "ad01_int8.tflite").exists():
        pytest.skip("needs ../shared/models/mlperf_tiny_ad")
    completed = subprocess.run([sys.executable, "bench/bench_vs_vela.py", "--only", "anomaly detection"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    summary = (PROJECT_ROOT / "bench" / "out" / "bench_vs_vela.md").read_text().splitlines()
    (row,) = [line for line in summary if line.startswith("| anomaly detection")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "10/10 / 10/10" and cells[-1] == "yes"  # every layer on both; ours bit-exact
    ours, theirs = (float(value) for value in cells[3].split(" / "))  # Vela's estimate read from its summary CSV
    assert ours > 0 and theirs > 0
    # all flash: ours the constants and the instruction streams, Vela's its read-only tensor and its command stream
    flash = re.fullmatch(r"([\d.]+) KiB \(([\d.]+) of instructions\) / ([\d.]+) KiB \(([\d.]+) of commands\)", cells[7])
    assert flash, cells[7]
    ours_flash, instructions, vela_flash, commands = (float(value) for value in flash.groups())
    ours_weights, vela_read_only = float(cells[6].split(" KiB")[0]), float(cells[6].split("(")[1].split(" KiB")[0])
    assert abs(ours_flash - (ours_weights + instructions)) <= 0.11 and instructions > 0
    assert commands > 0 and vela_flash > vela_read_only
    per_layer = (PROJECT_ROOT / "bench" / "out" / "bench_vs_vela_anomaly_detection.md").read_text()
    assert per_layer.count("\n| ") >= 10  # a row per layer, Vela's cycles beside ours


def test_a_decomposed_operator_is_compared_with_all_of_its_vela_operators(tmp_path):
    """Vela writes keyword spotting's SOFTMAX as many NPU operators, each but the last writing an intermediate tensor: the
    per-layer comparison counts them all at the softmax's output, and no operator's cycles are lost or counted twice."""
    path = MODELS / "mlperf_tiny_kws" / "kws_ref_model.tflite"
    if not path.exists():
        pytest.skip("needs ../shared/models/mlperf_tiny_kws")
    vela = Path(sys.executable).with_name("vela")
    subprocess.run([str(vela), *VELA_ARGS, "--output-dir", str(tmp_path), str(path)], check=True, capture_output=True, timeout=600)
    with (tmp_path / f"{path.stem}_per-layer.csv").open() as rows:
        rows = list(csv.DictReader(rows))
    layers = vela_layers(rows)
    softmax_rows = [row for row in rows if row["Original Operator"] == "Softmax"]
    (softmax,) = [layer for layer in layers.values() if layer["operator"] == "Softmax"]
    assert len(softmax_rows) > 1 and softmax["operators"] == len(softmax_rows)
    assert softmax["cycles"] == sum(float(row["Op Cycles"]) for row in softmax_rows)
    assert sum(layer["cycles"] for layer in layers.values()) == sum(float(row["Op Cycles"]) for row in rows)
    assert sum(layer["operators"] for layer in layers.values()) == len(rows)
