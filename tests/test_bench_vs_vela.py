"""bench/bench_vs_vela.py as a user runs it: Arm's Vela (the vela extra, installed with the tests) and our compiler on
MLCommons' anomaly-detection file, the table written with Vela's figures read from its own CSV files and ours bit-exact."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import MODELS, PROJECT_ROOT


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
    per_layer = (PROJECT_ROOT / "bench" / "out" / "bench_vs_vela_anomaly_detection.md").read_text()
    assert per_layer.count("\n| ") >= 10  # a row per layer, Vela's cycles beside ours
