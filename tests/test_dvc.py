"""`dvc repro` on a fresh copy of the project runs the same stage functions as
run.py (same keys, same store), and a second `dvc repro` does nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT


def _project_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=PROJECT_ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    return [name for name in listed if name and (PROJECT_ROOT / name).is_file()]


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> Path:
    """The working tree as a fresh clone would have it: tracked and addable files only."""
    clone = tmp_path_factory.mktemp("clone") / "project"
    for name in _project_files():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_ROOT / name, clone / name)
    for command in (["git", "init", "-q"], ["git", "add", "-A"],
                    ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", "commit", "-qm", "snapshot"]):
        subprocess.run(command, cwd=clone, check=True, capture_output=True)
    return clone


def _dvc(clone: Path, *args: str) -> subprocess.CompletedProcess:
    venv_bin = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([str(venv_bin / "dvc"), *args], cwd=clone, env=env, capture_output=True, text=True, timeout=1200)


def test_dvc_repro_runs_the_pipeline_and_a_second_repro_is_a_no_op(fresh_clone):
    first = _dvc(fresh_clone, "repro")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "Running stage 'import'" in first.stdout and "Running stage 'fold_check'" in first.stdout
    assert (fresh_clone / "dvc_artifacts" / "fold_check" / "graph.json").is_file()
    metrics = json.loads((fresh_clone / "dvc_artifacts" / "metrics" / "import.json").read_text())
    assert metrics["float_accuracy"] >= 0.9
    run_info = json.loads((fresh_clone / "dvc_artifacts" / "run.json").read_text())
    assert run_info["mlflow_run_id"]

    second = _dvc(fresh_clone, "repro")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Running stage" not in second.stdout
    status = _dvc(fresh_clone, "status")
    assert "up to date" in status.stdout


def test_run_py_reuses_what_dvc_repro_built(fresh_clone):
    """One implementation per stage: run.py finds DVC's outputs in the store under the same keys."""
    if not (fresh_clone / "dvc_artifacts" / "run.json").exists():
        pytest.skip("needs the dvc repro test first")
    dvc_keys = json.loads((fresh_clone / "dvc_artifacts" / "run.json").read_text())["stages"]
    completed = subprocess.run([sys.executable, "run.py", "export_dir=out"], cwd=fresh_clone,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    run_keys = json.loads((fresh_clone / "out" / "run.json").read_text())["stages"]
    for stage, info in run_keys.items():
        assert info == {"key": dvc_keys[stage]["key"], "reused": True}


def test_an_edited_dvc_output_is_refused_before_the_next_stage_computes(fresh_clone):
    """Edited files under dvc_artifacts/ would be stored under the honest key of their manifest,
    which every later run.py would serve: the stage refuses them, naming the file, and stores nothing."""
    table = fresh_clone / "dvc_artifacts" / "calibrate" / "calibration_table.json"
    if not table.exists():
        pytest.skip("needs the dvc repro test first")
    honest = table.read_bytes()
    store = fresh_clone / ".store" / "annotate"
    before = sorted(path.name for path in store.iterdir())
    table.write_bytes(honest.replace(b'"log2scale": ', b'"log2scale": 1', 1))
    try:
        completed = subprocess.run([sys.executable, "-m", "pipeline.dvc_stage", "annotate"], cwd=fresh_clone,
                                   capture_output=True, text=True, timeout=600)
    finally:
        table.write_bytes(honest)
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert "calibration_table.json differ from its manifest" in completed.stderr and "dvc repro --force calibrate" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert sorted(path.name for path in store.iterdir()) == before


def test_dvc_yaml_is_generated_from_the_stage_table():
    from pipeline.dvcgen import render

    assert (PROJECT_ROOT / "dvc.yaml").read_text() == render()


def test_dvc_hydra_composition_is_enabled():
    config = (PROJECT_ROOT / ".dvc" / "config").read_text()
    assert "[hydra]" in config and "enabled = true" in config
