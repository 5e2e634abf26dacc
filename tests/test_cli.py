"""run.py as a shell user meets it: the app help and shell completion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT
from pipeline.params import CalibMethod
from pipeline.stages import STAGE_NAMES


def _run_py(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", *args], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def test_help_lists_the_stages_models_methods_targets_and_common_overrides():
    completed = _run_py("--help")
    assert completed.returncode == 0, completed.stderr
    text = completed.stdout
    assert " -> ".join(STAGE_NAMES) in text  # in the order they run
    for group in ("model", "target", "data"):
        options = sorted(path.stem for path in (PROJECT_ROOT / "conf" / group).glob("*.yaml"))
        assert f"{group}: {', '.join(options)}" in text
    for method in CalibMethod:
        assert f"\n  {method.value} " in text, method
    for override in ("calib.method=", "model.file.path=", "until=", "store.url=", "tracking_uri="):
        assert override in text
    assert "model:\n  name:" not in text and len(text.splitlines()) < 60  # no config dump


@pytest.mark.parametrize("line, expected", [
    ("python run.py calib.method=", {f"calib.method={method.value}" for method in CalibMethod}),
    ("python run.py -m calib.method=minmax,k", {"calib.method=minmax,kl"}),
    ("python run.py calib.weight_method=", {"calib.weight_method=minmax", "calib.weight_method=mse"}),
    ("python run.py calib.equalize=", {"calib.equalize=true", "calib.equalize=false"}),
    ("python run.py target=", {f"target={path.stem}" for path in (PROJECT_ROOT / "conf" / "target").glob("*.yaml")}),
    ("python run.py calib.me", {"calib.method="}),
])
def test_shell_completion_offers_every_choice_of_a_typed_value(line, expected):
    """What bash's completion script asks (`COMP_LINE=... python run.py -sc query=bash`)."""
    completed = _run_py("-sc", "query=bash", env={"COMP_LINE": line})
    assert completed.returncode == 0, completed.stderr
    assert set(completed.stdout.split()) == expected


def test_the_bash_completion_script_installs():
    completed = _run_py("-sc", "install=bash")
    assert completed.returncode == 0 and "hydra_bash_completion" in completed.stdout
