"""What a process killed outright leaves open in MLflow, closed by the next run of its experiment on that machine
(pipeline/liveness.py): a sweep's parent run whose launcher was killed is KILLED, a logged model whose run was killed
while logging it is FAILED; what a live process holds stays as it is."""

from __future__ import annotations

import subprocess
import sys

from mlflow.entities import LoggedModelStatus
from mlflow.tracking import MlflowClient

from conftest import PROJECT_ROOT, tracking_override
from pipeline.liveness import PROCESS_TAGS
from pipeline.logged_model import close_abandoned_models
from pipeline.tracking import close_abandoned_runs

LAUNCHER_KILLED = """
import os, sys
from mlflow.tracking import MlflowClient
from pipeline.liveness import record_launcher
from pipeline.tracking import Sweep, sweep_parent_run
client = MlflowClient(tracking_uri=sys.argv[1])
experiment = client.create_experiment(sys.argv[3])
record_launcher(sys.argv[2])  # what the launcher does first (SweepSummary.on_multirun_start)
sweep = Sweep(id="s1", directory=sys.argv[2], overrides=("calib.method=minmax,kl",), job=0)
print(sweep_parent_run(client, experiment, sweep), flush=True)  # the first job makes the parent
os._exit(9)  # the launcher and its jobs killed outright (one process: Hydra's basic launcher)
"""

MODEL_KILLED = """
import os, sys
from mlflow.tracking import MlflowClient
import pipeline.logged_model as logged_model
client = MlflowClient(tracking_uri=sys.argv[1])
experiment = client.create_experiment(sys.argv[2])
run = client.create_run(experiment)
logged_model.stage_model = lambda *args, **kwargs: os._exit(9)  # killed while the model's files are written
logged_model._new_model(client, experiment, run.info.run_id, "m", "key", None, None, None, {}, {})
"""


def _killed(script: str, *args: str) -> str:
    completed = subprocess.run([sys.executable, "-c", script, *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 9, completed.stderr[-3000:]
    return completed.stdout.strip()


def test_a_parent_run_whose_launcher_was_killed_is_closed_by_the_next_run(tmp_path):
    uri = tracking_override(tmp_path).split("=", 1)[1]
    parent_id = _killed(LAUNCHER_KILLED, uri, str(tmp_path / "sweep"), "digits")
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("digits").experiment_id
    assert client.get_run(parent_id).info.status == "RUNNING"
    live = client.create_run(experiment, tags={"host": "another-machine", "pid": "1", "pid_started": "1.0"})  # not checkable here
    assert close_abandoned_runs(client, experiment) == [parent_id]
    parent = client.get_run(parent_id)
    assert parent.info.status == "KILLED" and "ended without closing the run" in parent.data.tags["end_reason"]
    assert not set(PROCESS_TAGS) & set(parent.data.tags) and client.get_run(live.info.run_id).info.status == "RUNNING"


def test_a_logged_model_left_pending_by_a_killed_run_is_marked_failed(tmp_path):
    uri = tracking_override(tmp_path).split("=", 1)[1]
    _killed(MODEL_KILLED, uri, "digits")
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("digits").experiment_id
    (pending,) = client.search_logged_models([experiment])
    assert pending.status == LoggedModelStatus.PENDING and set(PROCESS_TAGS) <= set(pending.tags)
    assert close_abandoned_models(client, experiment) == [pending.model_id]
    closed = client.get_logged_model(pending.model_id)
    assert closed.status == LoggedModelStatus.FAILED and "killed" in closed.tags["end_reason"]
    assert not set(PROCESS_TAGS) & set(closed.tags) and close_abandoned_models(client, experiment) == []
