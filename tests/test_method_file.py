"""A calibration method is one file: a copy of the project with one new module in
core/quantize/calibration/methods/ (a method with a setting of its own) takes it as `calib.method`, its setting as
`calib.<setting>` with its default and check, lists it in `run.py --help`, searches it in calib.method=auto, and runs
it, with no other file touched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import copy_of_the_project

HALF_MAX = '''"""halfmax: a fraction of the largest |x| seen (a test's method)."""

from ..histogram import TensorStatistics
from .base import CalibrationSettings, Setting, ThresholdMethod, register_method, require_observed


@register_method
class HalfMax(ThresholdMethod):
    name = "halfmax"
    summary = "a fraction of the largest |x| seen"
    FRACTION = Setting("halfmax_fraction", 0.5, "the fraction of the largest |x| kept", check="fraction")
    settings = (FRACTION,)
    auto_rank = 5  # one of calib.method=auto's candidates, after the shipped four

    def threshold(self, stats: TensorStatistics, settings: CalibrationSettings) -> float:
        require_observed(stats, self.name)
        return float(stats.absmax) * settings.option(self.FRACTION)
'''


@pytest.fixture(scope="module")
def project_with_a_new_method(tmp_path_factory) -> Path:
    copy = copy_of_the_project(tmp_path_factory.mktemp("project"))
    (copy / "core/quantize/calibration/methods/halfmax.py").write_text(HALF_MAX)
    return copy


def _run_py(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", *args], cwd=project, capture_output=True, text=True, timeout=600)


def test_the_new_method_is_a_choice_with_its_setting_in_the_help(project_with_a_new_method):
    shown = _run_py(project_with_a_new_method, "--help")
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if line.strip().startswith("halfmax "))
    assert "a fraction of the largest |x| seen" in line and "calib.halfmax_fraction (default 0.5)" in line
    refused = _run_py(project_with_a_new_method, "calib.halfmax_fraction=2", "until=import")
    assert refused.returncode == 2 and "calib.halfmax_fraction=2" in refused.stderr and "fraction" in refused.stderr


def test_the_new_method_is_one_of_autos_candidates(project_with_a_new_method):
    shown = _run_py(project_with_a_new_method, "--cfg", "job")
    assert shown.returncode == 0, shown.stderr
    assert yaml.safe_load(shown.stdout)["calib"]["auto"]["methods"] == ["minmax", "percentile", "mse", "kl", "halfmax"]


def test_the_new_method_calibrates_with_its_setting(project_with_a_new_method, model_cache):
    project = project_with_a_new_method
    ran = _run_py(project, "calib.method=halfmax", "calib.halfmax_fraction=0.25", "until=calibrate", f"store.cache_dir={model_cache}",
                  "quality.enforce=false",  # a quarter of the range clips: the guard would stop it
                  "export_dir=out")
    assert ran.returncode == 0, ran.stderr[-3000:]
    table = json.loads((project / "out" / "calibrate" / "calibration_table.json").read_text())
    stats = json.loads((project / "out" / "calibrate" / "histograms" / "index.json").read_text())
    # the layer inputs it chose: a quarter of the largest |x| seen, before the target rounds it to a power of two
    chosen = {tensor: entry for tensor, entry in table["tensors"].items() if entry["method"] == "halfmax"}
    assert chosen, {entry["method"] for entry in table["tensors"].values()}
    for tensor, entry in chosen.items():
        assert entry["threshold"] == pytest.approx(0.25 * stats[tensor]["absmax"])
