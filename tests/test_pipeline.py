"""The pipeline as a user runs it: stages reused by key, MLflow runs read back,
exports, a killed stage leaving no entry, and a parallel Hydra sweep."""

from __future__ import annotations

import json
import os
import re
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from conftest import PROJECT_ROOT, compose, tracking_override
from slurm_cluster import missing_binaries, single_node_cluster
from pipeline.main import run_pipeline
from pipeline.runner import StageParams
from pipeline.stages import STAGE_NAMES, STAGES
from pipeline.store import ArtifactStore
from pipeline.tracking import PROCESS_TAGS

QUIET = Console(file=open(os.devnull, "w"))


def _run(*overrides):
    cfg = compose(*overrides)
    return cfg, run_pipeline(cfg, console=QUIET)


def _digits_overrides(root: Path, model_cache: Path) -> list[str]:
    return [f"store.url={root / 'store'}", f"store.cache_dir={model_cache}", tracking_override(root)]


@pytest.fixture(scope="module")
def digits_runs(tmp_path_factory, model_cache):
    """The default pipeline run twice on one store, then with another calibration method."""
    root = tmp_path_factory.mktemp("digits")
    overrides = _digits_overrides(root, model_cache)
    cfg, first = _run(*overrides, f"export_dir={root / 'export'}")
    _, again = _run(*overrides)
    _, second = _run(*overrides, "calib.method=kl")
    return root, cfg, first, second, again


def _by_stage(summary):
    return {result.stage.name: result for result in summary.results}


def test_second_run_reuses_every_stage_with_the_same_keys(digits_runs):
    _, _, first, _, again = digits_runs
    assert [r.stage.name for r in first.results] == list(STAGE_NAMES)
    assert not any(r.reused for r in first.results)
    assert all(r.reused for r in again.results)
    assert [r.key for r in first.results] == [r.key for r in again.results]


def test_calibration_method_does_not_change_upstream_keys(digits_runs):
    root, _, first, second, _ = digits_runs
    first_stages, second_stages = _by_stage(first), _by_stage(second)
    for stage in ("import", "fold_check"):
        assert second_stages[stage].reused and second_stages[stage].key == first_stages[stage].key
    assert not second_stages["calibrate"].reused and second_stages["calibrate"].key != first_stages["calibrate"].key
    store = ArtifactStore(str(root / "store"))
    assert store.entries("import") == [first_stages["import"].key]
    assert store.entries("fold_check") == [first_stages["fold_check"].key]
    assert len(store.entries("calibrate")) == 2


def test_digits_model_reports_float_accuracy_and_folds_its_batch_norms(digits_runs):
    _, _, first, _, _ = digits_runs
    assert first.metrics["import.float_accuracy"] >= 0.9
    assert first.metrics["fold_check.batch_norms_folded"] >= 3
    assert first.metrics["fold_check.max_rel_diff"] <= 1e-4


def test_export_dir_holds_artifacts_metrics_and_run_info(digits_runs):
    root, _, first, _, _ = digits_runs
    export = root / "export"
    metrics = json.loads((export / "metrics.json").read_text())
    assert metrics == first.metrics
    assert all(isinstance(value, (int, float)) for value in metrics.values())
    run_info = json.loads((export / "run.json").read_text())
    assert run_info["mlflow_run_id"] == first.mlflow_run_id
    assert run_info["stages"]["import"] == {"key": first.results[0].key, "reused": False}
    for stage in STAGE_NAMES:
        assert (export / stage / "manifest.json").is_file()
    assert (export / "fold_check" / "graph.json").is_file() and (export / "calibrate" / "calibration_table.json").is_file()


def test_mlflow_holds_one_run_per_pipeline_run_with_params_tags_metrics(digits_runs):
    from mlflow.tracking import MlflowClient

    root, cfg, first, second, again = digits_runs
    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("digits")
    runs = client.search_runs([experiment.experiment_id])
    assert {run.info.run_id for run in runs} == {first.mlflow_run_id, second.mlflow_run_id, again.mlflow_run_id}
    by_id = {run.info.run_id: run for run in runs}
    first_run, second_run = by_id[first.mlflow_run_id], by_id[second.mlflow_run_id]
    assert first_run.data.params["calib.method"] == "mse" and second_run.data.params["calib.method"] == "kl"
    # named by their choices, not randomly: method-target-model
    assert (first_run.info.run_name, second_run.info.run_name) == ("mse-tf2ir-digits", "kl-tf2ir-digits")
    assert first_run.data.params["model.builtin.epochs"] == str(cfg.model.builtin.epochs)
    assert len(first_run.data.tags["git_commit"]) in (7, 40) or first_run.data.tags["git_commit"] == "unknown"
    # the headline metrics only (stage table), not bookkeeping or timings; every metric in metrics.json
    headline = {f"{stage.name}.{name}" for stage in STAGES for name in stage.headline}
    single_point = {name for name in first_run.data.metrics if name.count(".") == 1}
    assert single_point <= headline and {"annotate.top1", "simulate.end_point_agreement", "codegen.bitexact"} <= single_point
    assert first_run.data.metrics["import.float_accuracy"] == pytest.approx(first.metrics["import.float_accuracy"], abs=5e-5)
    # rounded to what they mean (MLflow prints every digit it is given): decibels to 0.01, fractions to 0.01%
    sqnr, top1 = first_run.data.metrics["annotate.sqnr_db_min"], first_run.data.metrics["annotate.top1"]
    assert sqnr == round(first.metrics["annotate.sqnr_db_min"], 2) and sqnr != first.metrics["annotate.sqnr_db_min"]
    assert abs(top1 - first.metrics["annotate.top1"]) <= 5e-5 and top1 == round(top1, 4)
    everything = json.loads(Path(client.download_artifacts(first.mlflow_run_id, "metrics.json", str(root))).read_text())
    assert everything == pytest.approx(first.metrics) and "fold_check.wall_s" in everything
    run_info = json.loads(Path(client.download_artifacts(second.mlflow_run_id, "run.json", str(root))).read_text())
    assert run_info["stages"]["fold_check"]["reused"] is True and run_info["stages"]["calibrate"]["key"] == second.results[2].key
    # a per-layer series is a table with the layers' names, never a metric (whose run-page value is the last layer's)
    assert not client.get_metric_history(first.mlflow_run_id, "annotate.layer_sqnr.sqnr_db")
    layer_sqnr = json.loads((first.results[3].artifact.directory / "series" / "layer_sqnr.json").read_text())
    logged = json.loads(Path(client.download_artifacts(first.mlflow_run_id, "series/annotate.layer_sqnr.json", str(root))).read_text())
    assert logged["columns"] == ["layer_index", "layer", "sqnr_db"] and len(layer_sqnr) == first.metrics["emit_ir.layers"]
    assert [row[1:] for row in logged["data"]] == [[row["layer"], pytest.approx(row["sqnr_db"])] for row in layer_sqnr]
    # pictures at the artifact root under the same names in every run (MLflow's compare view shows root files)
    roots = [{item.path for item in client.list_artifacts(run_id)} for run_id in (first.mlflow_run_id, second.mlflow_run_id)]
    assert {"annotate-layer_sqnr.png", "calibrate-clipping.png", "simulate-layer_agreement.png"} <= roots[0] & roots[1]
    assert "fold_check/report.json" in {item.path for item in client.list_artifacts(first.mlflow_run_id, "fold_check")}
    # typed for model development, not MLflow 3's GenAI layout; the data as dataset inputs with digests
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    # the runs table's shared view (the link a run prints opens it): the headline figures as columns, each one the runs have
    columns = json.loads(experiment.tags["mlflow.sharedViewState.headline"])["selectedColumns"]
    metric_columns = {column[len("metrics.`"):-1] for column in columns if column.startswith("metrics.`")}
    assert {"annotate.top1", "annotate.sqnr_db_min", "codegen.bitexact"} <= metric_columns <= set(first_run.data.metrics)
    assert {"params.`calib.method`", "params.`target.name`"} <= set(columns)
    inputs = {item.tags[0].value: item.dataset for item in first_run.inputs.dataset_inputs}
    assert set(inputs) == {"calibration", "evaluation"} and inputs["calibration"].digest != inputs["evaluation"].digest
    assert by_id[again.mlflow_run_id].inputs.dataset_inputs[0].dataset.digest in {d.digest for d in inputs.values()}


def test_a_run_that_reached_codegen_logs_its_model_in_mlflow_with_its_signature(digits_runs):
    """MLflow 3's logged model: found by search_logged_models, linked to the runs that made it (a run that made the same
    bytes links the same model), its signature the network input's int8 tensor with its scale in the metadata."""
    import mlflow
    from mlflow.models import Model

    root, cfg, first, second, again = digits_runs
    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
    models = {model.model_id: model for model in mlflow.search_logged_models(experiment_ids=[first.mlflow_experiment_id], output_format="list")}
    assert set(models) == {first.logged_model_id, second.logged_model_id} and first.logged_model_id == again.logged_model_id
    assert models[first.logged_model_id].source_run_id == first.mlflow_run_id and models[first.logged_model_id].name == "digits-tf2ir-mse"
    assert all(model.status == "READY" and not set(PROCESS_TAGS) & set(model.tags) for model in models.values())  # pending-only tags
    downloaded = Path(mlflow.artifacts.download_artifacts(f"models:/{first.logged_model_id}", dst_path=str(root / "model")))
    described = Model.load(str(downloaded / "MLmodel"))
    (spec,) = described.signature.inputs.inputs
    table = json.loads((downloaded / "ir" / "calibration_table.json").read_text())
    assert table == json.loads((_by_stage(first)["calibrate"].artifact.directory / "calibration_table.json").read_text())
    assert (spec.name, spec.type, spec.shape) == ("input", np.dtype(np.int8), (-1, 8, 8, 1))
    (log2scale,) = [entry["log2scale"] for entry in table["tensors"].values() if entry["kind"] == "input"]
    assert described.metadata["inputs"]["input"] == {"dtype": "int8", "scale": 2.0 ** -log2scale, "zero_point": 0, "shape": [8, 8, 1]}
    linked = mlflow.get_run(again.mlflow_run_id).outputs.model_outputs
    assert [output.model_id for output in linked] == [first.logged_model_id]


def test_each_model_file_is_its_own_experiment():
    """MLCommons' float ResNet-8 and its int8 file share a model config (keras_cifar10) but are two models."""
    from pipeline.tracking import experiment_name

    assert experiment_name(compose()) == "digits"  # a built-in model: its name
    names = {experiment_name(compose("model=keras_cifar10", f"model.file.path=/models/{name}", "data.path=/data"))
             for name in ("pretrainedResnet.h5", "pretrainedResnet_quant.tflite")}
    assert names == {"keras_cifar10/pretrainedResnet.h5", "keras_cifar10/pretrainedResnet_quant.tflite"}


def test_the_closing_hint_opens_a_server_in_a_browser_and_a_local_store_with_mlflow_ui():
    from pipeline.tracking import ui_hint

    assert ui_hint("http://127.0.0.1:5000") == "open http://127.0.0.1:5000/ in a browser"
    assert "--backend-store-uri" not in ui_hint("https://mlflow.example.com")
    assert ui_hint("sqlite:///mlflow.db") == "`mlflow ui --backend-store-uri sqlite:///mlflow.db`"
    # with the experiment: its runs table in the headline view, not MLflow 3's GenAI overview
    assert ui_hint("http://127.0.0.1:5000/", "7") == ("open http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning"
                                                     "&viewStateShareKey=headline in a browser")
    assert ui_hint("sqlite:///mlflow.db", "7").endswith(", then open http://127.0.0.1:5000/#/experiments/7/runs?"
                                                       "workflowType=machine_learning&viewStateShareKey=headline")


def test_stage_cannot_read_config_it_did_not_declare():
    params = StageParams("fold_check", {"fold_check": object()})
    with pytest.raises(AttributeError, match="does not declare"):
        _ = params.model


@pytest.mark.parametrize("model", ["mbv1_cifar10", "ssd_mbv2"])
def test_real_qat_graphs_import_and_fold_exactly_then_reuse(model, workspace):
    _, first = _run(f"model={model}", "until=fold_check", *workspace)
    assert first.metrics["import.quantization_aware"] == 1.0
    assert first.metrics["fold_check.max_abs_diff"] <= 1e-6
    _, second = _run(f"model={model}", "until=fold_check", *workspace)
    assert all(r.reused for r in second.results)


def test_model_file_by_path_has_the_same_key_as_by_cache(workspace, model_cache):
    from conftest import MBV1_GRAPH

    _, by_cache = _run("model=mbv1_cifar10", "until=import", *workspace)
    _, by_path = _run("model=mbv1_cifar10", "until=import", f"model.file.path={MBV1_GRAPH}", *workspace)
    assert by_path.results[0].reused and by_path.results[0].key == by_cache.results[0].key


def _store_entries(store: Path, stage: str) -> list[str]:
    return ArtifactStore(str(store)).entries(stage)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_a_stage_killed_midway_leaves_no_entry_and_no_running_mlflow_run(tmp_path, model_cache, sig):
    """Ctrl-C and SIGTERM: one line, exit 130, build directory removed, MLflow run KILLED with the reason.
    SIGKILL: the next run collects the orphan build directory and marks the abandoned MLflow run KILLED."""
    from mlflow.tracking import MlflowClient

    store, database, log = tmp_path / "store", tmp_path / "mlflow.db", tmp_path / "stderr.txt"
    command = [sys.executable, "run.py", f"store.url={store}", f"store.cache_dir={model_cache}",
               f"tracking_uri=sqlite:///{database}", "model.builtin.epochs=400"]
    # a shell's background job inherits SIGINT ignored, and Python then never raises KeyboardInterrupt:
    # give the run the default disposition a terminal gives it
    with open(log, "w") as stderr:
        process = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 240
        # the import stage is building: a build directory under .tmp (not preflight's write probe, a file there for a moment)
        while not (store / ".tmp").is_dir() or not any(path.is_dir() for path in (store / ".tmp").iterdir()):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(1.0)
        process.send_signal(sig)
        returncode = process.wait(timeout=120)
    assert _store_entries(store, "import") == []
    client = MlflowClient(tracking_uri=f"sqlite:///{database}")
    (killed,) = client.search_runs([client.get_experiment_by_name("digits").experiment_id])
    if sig == signal.SIGKILL:
        assert killed.info.status == "RUNNING" and list((store / ".tmp").iterdir())
        completed = subprocess.run([sys.executable, "run.py", "until=import", *command[2:5]], cwd=PROJECT_ROOT,
                                   capture_output=True, text=True, timeout=600)
        assert completed.returncode == 0, completed.stderr[-3000:]
        assert "removed 1 unfinished build directory" in completed.stderr
        killed = client.get_run(killed.info.run_id)
        assert "ended without closing the run" in killed.data.tags["end_reason"]
    else:
        stderr = log.read_text()
        assert returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
        reason = "interrupted (Ctrl-C)" if sig == signal.SIGINT else "terminated (SIGTERM)"
        assert f"stopped: {reason} while stage import ran" in stderr
        assert killed.data.tags["end_reason"].startswith(reason)
    assert killed.info.status == "KILLED"
    assert not set(PROCESS_TAGS) & set(killed.data.tags)  # they served while it ran; the run page does without them
    assert list((store / ".tmp").iterdir()) == []


def test_parallel_sweep_shares_store_and_mlflow(tmp_path, model_cache):
    """`-m calib.method=minmax,kl,qat hydra/launcher=joblib` with 2 jobs: two processes build the
    same import and fold_check keys at once; both succeed, one entry each. The qat job cannot
    run on a float model: it fails with its reason in MLflow and the sweep goes on."""
    from mlflow.tracking import MlflowClient

    store, database = tmp_path / "store", tmp_path / "mlflow.db"
    command = [sys.executable, "run.py", "-m", "calib.method=minmax,kl,qat", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
               f"store.url={store}", f"store.cache_dir={model_cache}", f"tracking_uri=sqlite:///{database}",
               f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    completed = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900,
                               env={**os.environ, "COLUMNS": "80"})  # a terminal of 80 columns, CI's log
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert len(_store_entries(store, "import")) == 1 and len(_store_entries(store, "fold_check")) == 1
    client = MlflowClient(tracking_uri=f"sqlite:///{database}")
    runs = client.search_runs([client.get_experiment_by_name("digits").experiment_id])
    status = {run.data.params["calib.method"]: run.info.status for run in runs if run.data.tags.get("sweep_role") != "parent"}
    assert status == {"kl": "FINISHED", "minmax": "FINISHED", "qat": "FAILED"}
    assert not [run.data.tags for run in runs if set(PROCESS_TAGS) & set(run.data.tags)]
    failed = next(run for run in runs if run.data.params.get("calib.method") == "qat")
    assert "has none" in failed.data.tags["error"] and "calibrate.images" not in failed.data.metrics
    sweep_ids = {run.data.tags.get("sweep_id") for run in runs}
    assert len(sweep_ids) == 1 and None not in sweep_ids
    # one parent run for the sweep, named by what it varies, closed by the sweep; the jobs nested under it
    parents = [run for run in runs if run.data.tags.get("sweep_role") == "parent"]
    assert len(parents) == 1 and parents[0].info.run_name == "sweep calib.method=minmax,kl,qat"
    assert parents[0].info.status == "FINISHED"
    jobs = [run for run in runs if run is not parents[0]]
    assert {run.data.tags["mlflow.parentRunId"] for run in jobs} == {parents[0].info.run_id}
    # the summary: every job with its figures or its reason, printed and saved beside the jobs, each named by the choice
    # it varied (the model and target every job shares are no part of it)
    summary = (tmp_path / "sweep" / "summary.md").read_text().splitlines()
    assert len(summary) == 2 + 3 + 2 and "2 of 3 job(s) succeeded" in completed.stderr
    assert summary[0].startswith("| job | calib.method | status |")
    qat_row = next(line for line in summary if "| qat |" in line)
    assert "FAILED" in qat_row and "has none" in qat_row
    minmax_row = next(line for line in summary if "| minmax |" in line)
    top1 = next(run for run in runs if run.info.run_name == "minmax-tf2ir-digits").data.metrics["annotate.top1"]
    assert f"| {top1:.4g} |" in minmax_row
    # the console: one line per finished job (no stage table), and a table that 80 columns hold whole
    console = completed.stderr.splitlines()
    assert "ran/reused" not in completed.stderr and "headline" not in completed.stderr
    job_lines = [line for line in console if re.match(r"job \d (minmax|kl)-tf2ir-digits: \d ran, \d reused", line)]
    assert len(job_lines) == 2, completed.stderr[-3000:]
    table = console[next(i for i, line in enumerate(console) if line.startswith("sweep: 3 job(s)")):]
    table = table[: next(i for i, line in enumerate(table) if line.startswith(("job ", "the same in every")) or "job(s) succeeded" in line)]
    assert all(len(line) <= 80 and "…" not in line for line in table), "\n".join(table)
    # figures equal in every finished job are said once beneath the table, not as a column of ones
    assert "C exact" not in "\n".join(table) and "the same in every finished job: " in completed.stderr
    assert "C exact 1" in next(line for line in console if line.startswith("the same in every finished job: "))
    # the parent run is a row like its jobs: the params they share, what varied, the best job's figures
    parent = client.get_run(parents[0].info.run_id)
    assert parent.data.params["calib.method"] == "minmax | kl | qat" and parent.data.params["target.name"] == "tf2ir"
    def figures(run):
        return run.data.metrics["annotate.sqnr_db_min"], run.data.metrics["annotate.top1"]

    # the verdict: the least end-point SQNR decides by default, top-1 breaks ties; printed with its rule, saved, tagged
    best = max(figures(run) for run in jobs if run.info.status == "FINISHED")
    (verdict,) = [line for line in console if line.startswith("best: job ")]
    assert "ranked by annotate.sqnr_db_min (higher is better), then annotate.top1" in verdict and verdict in summary
    named = next(run for run in jobs if f"({run.info.run_name})" in parent.data.tags["best_job"])
    assert f"calib.method={named.data.params['calib.method']}" in verdict and figures(named) == best
    assert parent.data.metrics["annotate.top1"] == best[1] and parent.data.tags["best_rule"] in verdict
    assert parent.data.metrics["codegen.bitexact"] == 1.0


def test_runs_that_differ_only_in_another_key_are_named_apart(tmp_path, model_cache):
    from mlflow.tracking import MlflowClient

    common = [f"store.url={tmp_path / 'store'}", f"store.cache_dir={model_cache}", tracking_override(tmp_path),
              "until=import"]
    for extra in ([], ["codegen.cflags=[-O1]"]):
        completed = subprocess.run([sys.executable, "run.py", *common, *extra], cwd=PROJECT_ROOT, capture_output=True, text=True,
                                   timeout=600)
        assert completed.returncode == 0, completed.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    names = sorted(run.info.run_name for run in client.search_runs([client.get_experiment_by_name("digits").experiment_id]))
    # the places (store, tracking) are no part of a name; what is computed is
    assert names == ["mse-tf2ir-digits until=import", "mse-tf2ir-digits until=import codegen.cflags=[-O1]"]


def test_a_sweep_whose_every_job_fails_exits_non_zero(tmp_path):
    command = [sys.executable, "run.py", "-m", "calib.num_images=0,-1", f"store.url={tmp_path / 'store'}",
               tracking_override(tmp_path), f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    completed = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 1, completed.stderr[-3000:]
    assert "0 of 2 job(s) succeeded" in completed.stderr
    assert completed.stderr.count("calib.num_images") >= 2  # each job says why


def test_strict_fold_check_refuses_the_float_graph_listing_every_batch_norm(digits_runs, model_cache):
    from pipeline.runner import StageFailed

    root = digits_runs[0]
    with pytest.raises(StageFailed) as error:
        _run(*_digits_overrides(root, model_cache), "fold_check.strict=true")
    message = str(error.value)
    assert "fold_check.strict=true" in message
    assert message.count("batchnorm") >= 5  # the five BatchNormalization layers of the digits CNN, each named
    assert ArtifactStore(str(root / "store")).entries("fold_check") == [digits_runs[2].results[1].key]  # nothing new


def test_strict_fold_check_accepts_a_qat_graph_whose_batch_norm_is_folded_in_graph(workspace):
    _, summary = _run("model=mbv1_cifar10", "fold_check.strict=true", "until=fold_check", *workspace)
    assert summary.metrics["fold_check.conv_bias_adds"] == 28


def test_fold_verification_fails_past_its_tolerance(digits_runs, model_cache):
    from pipeline.runner import StageFailed

    with pytest.raises(StageFailed, match="fold_check.tolerance"):
        _run(*_digits_overrides(digits_runs[0], model_cache), "fold_check.tolerance=1e-12")


def test_report_tabulates_the_runs_from_mlflow(digits_runs):
    from pipeline.report import runs_table

    root, _, first, second, again = digits_runs
    table = runs_table(f"sqlite:///{root / 'mlflow.db'}", "digits", ["import.float_accuracy", "annotate.top1"])
    assert table.splitlines()[1].startswith("| started | run | target | calib.method | other settings |")
    rows = [line for line in table.splitlines() if "| tf2ir |" in line]
    assert len(rows) == 3 and sum("| kl |" in row for row in rows) == 1
    # newest first, each with its name; the first run (mse, exported) is the oldest
    first_row = next(row for row in rows if "| mse-tf2ir-digits |" in row and row is rows[-1])
    assert f"{first.metrics['annotate.top1']:.4g}" in first_row and "| kl-tf2ir-digits |" in rows[0]


def test_identical_inputs_give_byte_identical_artifacts_in_two_fresh_stores(digits_runs, tmp_path, model_cache):
    """Every file of every stage, not only the keys: a later stage's key is the digest of its inputs' files."""
    from pipeline.hashing import file_digests

    _, _, first, _, _ = digits_runs
    _, fresh = _run(*_digits_overrides(tmp_path, model_cache))
    assert not any(result.reused for result in fresh.results)
    for ours, theirs in zip(fresh.results, first.results):
        assert file_digests(ours.artifact.directory) == file_digests(theirs.artifact.directory), ours.stage.name
        assert ours.key == theirs.key


def test_a_sweep_on_the_submitit_local_launcher_shows_each_jobs_output(tmp_path, model_cache):
    """The slurm extra's launcher with its local executor: jobs run in their own processes, the
    summary says where their output is, and that output holds the job's stage lines."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the slurm extra: make setup-slurm (make test installs it)")
    sweep = tmp_path / "sweep"
    command = [sys.executable, "run.py", "-m", "hydra/launcher=submitit_local", "calib.method=minmax,kl", "until=calibrate",
               f"store.url={tmp_path / 'store'}", f"store.cache_dir={model_cache}", tracking_override(tmp_path),
               f"hydra.sweep.dir={sweep}"]
    completed = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "2 of 2 job(s) succeeded" in completed.stderr and f"{sweep}/.submitit/" in completed.stderr
    outputs = sorted((sweep / ".submitit").glob("*/*_0_log.err"))
    assert len(outputs) == 2
    # each job's output: its one line (run, stages ran and reused, figures); the stages' lines are in its run.log
    assert {next(line for line in path.read_text().splitlines() if line.startswith("job ")).split()[1] for path in outputs} == {"0", "1"}
    for job in ("0", "1"):  # Hydra's per-job log has the same lines, through Python logging
        assert f"job {job} calibrate: ran" in (sweep / job / "run.log").read_text()


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """A single-node Slurm cluster on loopback (tests/slurm_cluster.py); skipped, saying why, where it cannot run."""
    missing = missing_binaries()
    if missing:
        pytest.skip(f"Slurm is not installed here (no {', '.join(missing)}): `make test` installs Debian's slurm-wlm and munge "
                    "(make setup-slurm-cluster) where it runs as root with apt-get")
    root = Path(tempfile.mkdtemp(prefix="qt-slurm-", dir="/tmp"))  # munge's socket path must stay short
    try:
        with single_node_cluster(root) as environment:
            yield environment
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_sweep_on_a_real_slurm_cluster_shares_one_store_and_every_job_is_bit_exact(slurm_cluster, tmp_path, model_cache):
    """`hydra/launcher=submitit_slurm` against slurmctld and slurmd on this machine: two jobs submitted with sbatch, run by
    slurmd, sharing one store and one MLflow database; each reaches codegen bit-exact and is a run nested in the sweep's
    parent; each warning the launcher prints is printed once."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the slurm extra: make setup-slurm (make test installs it)")
    from mlflow.tracking import MlflowClient

    sweep, database = tmp_path / "sweep", tmp_path / "mlflow.db"
    command = [sys.executable, "run.py", "-m", "hydra/launcher=submitit_slurm", "hydra.launcher.partition=test",
               "hydra.launcher.timeout_min=20", "calib.method=minmax,kl", f"store.url={tmp_path / 'store'}",
               f"store.cache_dir={model_cache}", f"tracking_uri=sqlite:///{database}", f"hydra.sweep.dir={sweep}"]
    completed = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900, env=slurm_cluster)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "2 of 2 job(s) succeeded" in completed.stderr and f"{sweep}/.submitit/" in completed.stderr
    # one Slurm array job (sbatch --array), its two tasks `<job id>_<task>`: Slurm's ids, not local processes
    tasks = sorted(path.name for path in (sweep / ".submitit").iterdir() if path.is_dir() and "_" in path.name)
    assert [task.split("_")[1] for task in tasks] == ["0", "1"] and len({task.split("_")[0] for task in tasks}) == 1, tasks
    client = MlflowClient(tracking_uri=f"sqlite:///{database}")
    runs = client.search_runs([client.get_experiment_by_name("digits").experiment_id])
    jobs = [run for run in runs if run.data.tags.get("sweep_role") != "parent"]
    assert sorted(run.data.params["calib.method"] for run in jobs) == ["kl", "minmax"]
    assert all(run.info.status == "FINISHED" and run.data.metrics["codegen.bitexact"] == 1.0 for run in jobs)
    assert len(_store_entries(tmp_path / "store", "import")) == 1  # one store: the second job reused the first's import
    # submitit's polling warnings (no accounting here: sacct has nothing), each once, not on stdout, stderr and Hydra's log
    calls = re.findall(r"Call #(\d+) - ", completed.stderr + completed.stdout)
    assert len(calls) == len(set(calls)), completed.stderr[-3000:]


def test_a_launcher_whose_extra_is_missing_says_what_to_install(monkeypatch):
    from pipeline.sweep import missing_launcher

    assert missing_launcher(["run.py", "-m", "calib.method=kl"]) is None
    monkeypatch.setitem(sys.modules, "hydra_plugins.hydra_submitit_launcher", None)  # as on a machine without the extra
    message = missing_launcher(["run.py", "-m", "hydra/launcher=submitit_slurm"])
    assert "hydra/launcher=submitit_slurm" in message and "make setup-slurm" in message


def test_a_run_without_pictures_gives_the_same_figures_and_series_and_draws_nothing(digits_runs, model_cache):
    """pictures=false (a wide sweep, CI): the stages from the first that draws run again (their outputs differ by the
    pictures), and each gives what the run with pictures gave, less every PNG. Last in this file: it adds store entries."""
    root, _, first, _, _ = digits_runs
    _, bare = _run(*_digits_overrides(root, model_cache), "pictures=false")
    first_drawing = next(index for index, stage in enumerate(STAGES) if stage.pictures)
    assert [result.reused for result in bare.results] == [index < first_drawing for index in range(len(STAGES))]
    figures = lambda summary: {key: value for key, value in summary.metrics.items()  # all but times
                               if not key.endswith(("_s", "_ms_per_image"))}
    assert figures(bare) == figures(first)
    for with_pictures, without in zip(first.results, bare.results):
        assert not list(without.artifact.directory.glob("*.png")), without.stage.name
        series = sorted((with_pictures.artifact.directory / "series").glob("*.json"))
        assert [path.read_bytes() for path in series] == [(without.artifact.directory / "series" / path.name).read_bytes()
                                                         for path in series]
    # what the run with pictures drew: each drawing stage's pictures but sensitivity's and cycles' (off, no accelerator)
    assert {(result.stage.name, path.stem) for result in first.results for path in result.artifact.directory.glob("*.png")} == \
        {(stage.name, name) for stage in STAGES for name in stage.pictures if name not in ("sensitivity", "cycles")}

