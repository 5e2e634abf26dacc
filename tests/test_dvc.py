"""`dvc repro` on a fresh copy of the project runs the same stage functions as
run.py (same keys, same store), and a second `dvc repro` does nothing."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from PIL import Image

from conftest import PROJECT_ROOT
from core.reports.absent import CARD_SIZE
from pipeline.dvc_stage import SUMMARY_METRICS
from pipeline.stages import STAGES, stage_named


def _project_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=PROJECT_ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    return [name for name in listed if name and (PROJECT_ROOT / name).is_file()]


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory, model_cache) -> Path:
    """The working tree as a fresh clone would have it: tracked and addable files only; its download cache (params.yaml's
    store.cache_dir, .cache) holds the built-in models the session's cache has (trained by the same code, so under the
    same digests: tests/test_build_cache.py tests the training and its cache)."""
    clone = tmp_path_factory.mktemp("clone") / "project"
    for name in _project_files():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_ROOT / name, clone / name)
    if (model_cache / "built").is_dir():
        shutil.copytree(model_cache / "built", clone / ".cache" / "built", ignore=shutil.ignore_patterns("*.lock", ".*"))
    for command in (["git", "init", "-q"], ["git", "config", "user.email", "ci@example.com"], ["git", "config", "user.name", "ci"],
                    ["git", "add", "-A"], ["git", "commit", "-qm", "snapshot"]):
        subprocess.run(command, cwd=clone, check=True, capture_output=True)
    return clone


README_DVC_BLOCK = re.compile(r"```sh\n((?:[^`]*\n)*?[^`]*dvc exp run[^`]*)```")


def readme_dvc_block() -> list[str]:
    """The commands of the README's DVC experiment block."""
    block = README_DVC_BLOCK.search((PROJECT_ROOT / "README.md").read_text()).group(1)
    return [re.sub(r"\s+#.*$", "", line).strip() for line in textwrap.dedent(block).splitlines() if line.strip()]


def _shell(clone: Path, command: str) -> subprocess.CompletedProcess:
    """A README line in bash in the clone (its `export PATH=$PWD/.venv/bin:$PATH` finds this venv's dvc)."""
    venv_bin = Path(sys.executable).parent
    (clone / ".venv").mkdir(exist_ok=True)
    if not (clone / ".venv" / "bin").exists():
        (clone / ".venv" / "bin").symlink_to(venv_bin)
    return subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"})


def _dvc(clone: Path, *args: str) -> subprocess.CompletedProcess:
    venv_bin = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([str(venv_bin / "dvc"), *args], cwd=clone, env=env, capture_output=True, text=True, timeout=1200)


def test_dvc_repro_runs_the_pipeline_and_a_second_repro_is_a_no_op(fresh_clone):
    first = _dvc(fresh_clone, "repro")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "Running stage 'import'" in first.stdout and "Running stage 'fold_check'" in first.stdout
    assert (fresh_clone / "dvc_artifacts" / "fold_check" / "graph.json").is_file()
    metrics = json.loads((fresh_clone / "metrics" / "import.json").read_text())
    assert metrics["import"]["float_accuracy"] >= 0.9
    run_info = json.loads((fresh_clone / "dvc_artifacts" / "run.json").read_text())
    assert run_info["mlflow_run_id"]
    # the track stage logs the model as run.py does, linked to its run (pipeline/logged_model.py)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{fresh_clone / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("digits").experiment_id
    assert run_info["mlflow_run_id"] in {model.source_run_id for model in client.search_logged_models([experiment])}
    assert "logged model models:/" in first.stdout + first.stderr

    second = _dvc(fresh_clone, "repro")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Running stage" not in second.stdout
    assert "is empty" not in first.stdout + first.stderr  # DVC warns of an empty dependency file (an empty __init__.py)
    # the default target has no accelerator: its cycles picture is a card that says so, drawn without matplotlib
    with Image.open(fresh_clone / "pictures" / "codegen" / "cycles.png") as card:
        assert card.format == "PNG" and card.size == CARD_SIZE
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


def test_a_quality_limit_stops_dvc_stage_and_run_py_alike_with_the_quality_status(fresh_clone):
    """One guard for both entry points: the stage's result is reused (quality keys are no stage's), the figure
    judged against params.yaml's / the override's quality.min_sqnr_db, exit status 3 from each."""
    if not (fresh_clone / "dvc_artifacts" / "run.json").exists():
        pytest.skip("needs the dvc repro test first")
    params = fresh_clone / "params.yaml"
    original = params.read_text()
    assert "  min_sqnr_db: 6.0\n" in original
    try:
        params.write_text(original.replace("  min_sqnr_db: 6.0\n", "  min_sqnr_db: 80.0\n"))
        staged = subprocess.run([sys.executable, "-m", "pipeline.dvc_stage", "annotate"], cwd=fresh_clone,
                                capture_output=True, text=True, timeout=600)
    finally:
        params.write_text(original)
    ran = subprocess.run([sys.executable, "run.py", "quality.min_sqnr_db=80", "hydra.run.dir=out-quality"], cwd=fresh_clone,
                         capture_output=True, text=True, timeout=600)
    for completed in (staged, ran):
        assert completed.returncode == 3, completed.stderr[-3000:]
        message = " ".join(completed.stderr.split())
        assert "stopped: quality check after annotate failed: end point " in message and "(limit 80 dB) (quality.min_sqnr_db)" in message
        assert "Traceback" not in completed.stderr


def test_an_edited_dvc_output_is_refused_before_the_next_stage_computes(fresh_clone):
    """Edited files under dvc_artifacts/ would be stored under the honest key of their manifest,
    which every later run.py would serve: the stage refuses them, naming the file, and stores nothing."""
    table = fresh_clone / "dvc_artifacts" / "calibrate" / "calibration_table.json"
    if not table.exists():
        pytest.skip("needs the dvc repro test first")
    honest = table.read_bytes()
    store = fresh_clone / ".store" / "annotate"
    before = sorted(path.name for path in store.iterdir())
    key = json.loads((fresh_clone / "dvc_artifacts" / "calibrate" / "manifest.json").read_text())["key"]
    stored = fresh_clone / ".store" / "calibrate" / key / "calibration_table.json"
    table.write_bytes(honest.replace(b'"log2scale": ', b'"log2scale": 1', 1))  # in place, as an editor or a script writes
    try:
        assert stored.read_bytes() == honest  # the edit reached the output only, never the stored entry
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


def _git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=clone, capture_output=True, text=True, check=True).stdout


def _dvc_json(clone: Path, *args: str):
    completed = _dvc(clone, *args, "--json")
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout)


def test_the_store_keeps_its_own_copy_of_what_dvc_outputs(fresh_clone):
    """The store entry is another file than DVC's output (which DVC's cache links when DVC saves it), so that an edit of
    the output in place cannot change what the store serves."""
    report = fresh_clone / "dvc_artifacts" / "annotate" / "report.json"
    if not report.exists():
        pytest.skip("needs the dvc repro test first")
    key = json.loads((fresh_clone / "dvc_artifacts" / "annotate" / "manifest.json").read_text())["key"]
    in_store = fresh_clone / ".store" / "annotate" / key / "report.json"
    md5 = hashlib.md5(report.read_bytes()).hexdigest()
    in_dvc_cache = fresh_clone / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]
    assert in_store.stat().st_ino not in (report.stat().st_ino, in_dvc_cache.stat().st_ino)
    assert in_store.read_bytes() == report.read_bytes() == in_dvc_cache.read_bytes()


def _experiments(shown: list) -> dict[str, dict]:
    """`dvc exp show --json` as {name: {"params": ..., "metrics": {stage.metric: value}}} (the baseline by its branch)."""
    rows = {}
    for baseline in shown:
        for rev in [baseline, *(exp["revs"][0] for exp in baseline.get("experiments") or [])]:
            data = rev.get("data") or {}
            metrics = {}
            for document in (data.get("metrics") or {}).values():
                metrics.update(document.get("data") or {})
            params = (data.get("params") or {}).get("params.yaml", {}).get("data", {})
            rows[rev.get("name") or rev["rev"]] = {"params": params, "metrics": metrics}
    return rows


def test_experiments_compare_by_their_headline_metrics_and_plots(fresh_clone):
    """Three calibration methods as DVC experiments: `dvc exp show` has every headline metric of every
    experiment (git-tracked, not `!`), no bookkeeping among them, and `dvc plots diff` draws each
    experiment's per-layer series."""
    if not (fresh_clone / "metrics" / "annotate.json").exists():
        pytest.skip("needs the dvc repro test first")
    # the README's experiment block, as written (its `dvc repro` is a no-op after the repro test's)
    for command in readme_dvc_block():
        completed = _shell(fresh_clone, command)
        assert completed.returncode == 0, command + "\n" + completed.stdout[-3000:] + completed.stderr[-3000:]
    assert (fresh_clone / "dvc_plots" / "index.html").is_file()
    status = _shell(fresh_clone, "git status --porcelain")
    assert status.returncode == 0 and status.stdout == "", status.stdout  # the walkthrough leaves nothing to commit
    rows = _experiments(_dvc_json(fresh_clone, "exp", "show"))
    baseline = next(name for name in rows if name not in ("workspace", "kl", "minmax"))
    for name in (baseline, "kl", "minmax"):
        metrics = rows[name]["metrics"]
        # DVC's one metrics file: the few figures a run is judged by, each a headline metric of its stage
        assert set(metrics) <= set(SUMMARY_METRICS) and {"top1", "sqnr_db_min", "bitexact", "constant_bytes"} <= set(metrics), name
        assert all(SUMMARY_METRICS[key].split(".", 1)[1] in stage_named(SUMMARY_METRICS[key].split(".")[0]).headline for key in metrics)
        assert metrics["bitexact"] == 1.0
    assert [rows[name]["params"]["calib"]["method"] for name in (baseline, "kl", "minmax")] == ["mse", "kl", "minmax"]
    # minmax's threshold is the largest |x| seen: it clips nothing; mse clips the tail it finds cheaper to lose (kl's
    # power-of-two thresholds may round up past the largest |x| on this small model: no assertion on it)
    assert rows["minmax"]["metrics"]["clipped_fraction_max"] == 0.0
    assert rows[baseline]["metrics"]["clipped_fraction_max"] > 0.0

    # the README's compact view: what differs, without the code and output hash columns
    compact = _dvc(fresh_clone, "exp", "show", "--only-changed", "--drop", ".*/.*", "--csv")
    header = compact.stdout.splitlines()[0].split(",")
    assert {"calib.method", "sqnr_db_min", "clipped_fraction_max"} <= set(header), header
    assert not any("/" in column for column in header) and len(header) < 20, header
    # minmax clips nothing and mse something (asserted above): their calibrate metrics differ on any machine
    diff = _dvc_json(fresh_clone, "metrics", "diff", "minmax", baseline)
    assert "clipped_fraction_max" in diff["metrics.json"]
    # `dvc metrics show` is one short table: a row, read whole at 120 columns
    shown = _shell(fresh_clone, "COLUMNS=120 dvc metrics show")
    lines = [line for line in shown.stdout.splitlines() if line.strip()]
    assert shown.returncode == 0 and len(lines) == 2 and lines[1].startswith("metrics.json"), shown.stdout
    assert all(len(line) <= 120 for line in lines), shown.stdout
    plots = _dvc_json(fresh_clone, "plots", "diff", baseline, "kl", "minmax")
    for plot in ("annotate.layer_sqnr", "calibrate.clipping", "simulate.layer_agreement"):
        values = plots["data"][plot][0]["content"]["data"]["values"]
        assert {row["rev"] for row in values} == {baseline, "kl", "minmax"}, plot
        layers = [row for row in values if row["rev"] == "kl"]
        names = [row[STAGE_SERIES[plot].label] for row in layers]  # the chart's x: names in network order
        assert [row[STAGE_SERIES[plot].x] for row in layers] == list(range(len(layers)))
        assert len(set(names)) == len(names) and all(isinstance(name, str) and not name.startswith("no data") for name in names)
    # a series this configuration does not give draws no points (no placeholder category on the others' axis)
    sensitivity = [row for entry in plots["data"].get("annotate.sensitivity", []) for row in entry["content"]["data"]["values"]]
    assert not sensitivity and not plots.get("errors"), (sensitivity, plots.get("errors"))
    # the pictures, as image plots of every experiment
    images = {name for name, entries in plots["data"].items() if entries and entries[0]["type"] == "image"}
    assert {"pictures/calibrate/histograms.png", "pictures/annotate/layer_sqnr.png", "pictures/simulate/layer_agreement.png"} \
        <= {name for name in images}, images


STAGE_SERIES = {f"{stage.name}.{series.name}": series for stage in STAGES for series in stage.series}


def test_dvc_plots_show_draws_offline(fresh_clone):
    """The page `dvc plots show` writes carries its chart libraries: no script from the network."""
    if not (fresh_clone / "plots" / "annotate" / "layer_sqnr.json").exists():
        pytest.skip("needs the dvc repro test first")
    completed = _dvc(fresh_clone, "plots", "show")
    assert completed.returncode == 0, completed.stderr[-3000:]
    page = (fresh_clone / "dvc_plots" / "index.html").read_text()
    assert "<script src=" not in page and "cdn.jsdelivr" not in page
    assert "window.vegaEmbed" in page and "vegaEmbed(" in page.split("window.vegaEmbed", 1)[1]
    assert '<img src="static/workspace_pictures_annotate_layer_sqnr.png"' in page.replace("\\", "/")
    # the revisions of an image plot share the width (DVC's own style keeps them in one line that scrolls sideways)
    containers = re.findall(r'<div\s+id="[^"]*"\s+style="([^"]*white-space: nowrap[^"]*)"', page)
    assert containers and 'div[style*="white-space: nowrap"] { display: flex !important;' in page


def test_the_offline_plots_page_is_what_the_pinned_libraries_make():
    pytest.importorskip("vl_convert", reason="vl-convert-python is a test requirement: make test installs it")
    from pipeline.plots_page import PAGE, page

    assert PAGE.read_text(encoding="utf8") == page(), "regenerate it: python -m pipeline.plots_page"


def test_a_temporary_experiment_keeps_its_results_in_the_users_repository(fresh_clone, tmp_path):
    """The README's `dvc exp run --temp -n minmax` runs in a copy DVC throws away: its MLflow run and store entries
    are in the user's repository, the run tagged with the experiment's name, baseline and ref."""
    from mlflow.tracking import MlflowClient

    assert "dvc exp run --temp -n minmax -S calib.method=minmax" in readme_dvc_block()
    client = MlflowClient(tracking_uri=f"sqlite:///{fresh_clone / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("digits")
    runs = client.search_runs([experiment.experiment_id], filter_string="tags.dvc_exp_name = 'minmax'") if experiment else []
    if not runs:
        pytest.skip("needs the experiments test first")
    assert len(runs) == 1, [run.info.run_name for run in client.search_runs([experiment.experiment_id])]
    run, baseline = runs[0], _git(fresh_clone, "rev-parse", "HEAD").strip()
    assert run.data.tags["git_commit"] == run.data.tags["dvc_exp_baseline"] == baseline
    assert run.data.tags["dvc_exp_ref"] == f"refs/exps/{baseline[:2]}/{baseline[2:]}/minmax"
    assert _git(fresh_clone, "rev-parse", "--verify", run.data.tags["dvc_exp_ref"]).strip()  # DVC kept the experiment there
    assert run.info.run_name.endswith("exp=minmax") and run.data.params["calib.method"] == "minmax"
    keys = json.loads(Path(client.download_artifacts(run.info.run_id, "run.json", str(tmp_path))).read_text())
    for stage, info in keys["stages"].items():
        assert (fresh_clone / ".store" / stage / info["key"] / "manifest.json").is_file(), stage
    assert not list((fresh_clone / ".dvc" / "tmp").glob("exps/tmp*/mlflow.db"))


def test_store_gc_keeps_what_the_dvc_lock_references(fresh_clone):
    """`python -m pipeline.store gc` with no run records kept leaves exactly the entries dvc.lock's
    outputs hold and their inputs; --dry-run removes nothing; a stage gc removed is computed again."""
    status = fresh_clone / "dvc_artifacts" / "status"
    if not status.is_dir():
        pytest.skip("needs the dvc repro test first")
    store = fresh_clone / ".store"

    def entries() -> set[tuple[str, str]]:
        return {(stage.name, path.name) for stage in STAGES if (store / stage.name).is_dir()
                for path in (store / stage.name).iterdir()}

    before = entries()
    dry = subprocess.run([sys.executable, "-m", "pipeline.store", "gc", "--keep-runs", "0", "--dry-run"], cwd=fresh_clone,
                         capture_output=True, text=True, timeout=600)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert entries() == before and "would remove" in dry.stdout
    collected = subprocess.run([sys.executable, "-m", "pipeline.store", "gc", "--keep-runs", "0"], cwd=fresh_clone,
                               capture_output=True, text=True, timeout=600)
    assert collected.returncode == 0, collected.stderr[-3000:]
    # what dvc_stage recorded as each output's entry (the lock is the workspace's: dvc repro just ran)
    locked = {(path.stem, json.loads(path.read_text())["key"]) for path in status.glob("*.json")}
    # and what they were computed from, transitively: a stage reused because its inputs' content is the same
    # as another experiment's (e.g. an equal IR from another method) records that experiment's inputs
    kept, pending = set(locked), list(locked)
    while pending:
        stage, key = pending.pop()
        manifest = json.loads((store / stage / key / "manifest.json").read_text())
        upstream = {(name, info["key"]) for name, info in manifest["inputs"].items()} - kept
        kept |= upstream
        pending.extend(upstream)
    assert entries() == kept
    assert before - entries(), "the other experiments' entries were collected"
    assert f"removed {len(before - entries())} entr" in collected.stdout
    again = _dvc(fresh_clone, "status")
    assert "up to date" in again.stdout
