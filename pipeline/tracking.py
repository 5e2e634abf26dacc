"""MLflow: one run per pipeline run, in an experiment named after the model.

Params are the flattened config; tags carry each stage's key and whether it
was reused, the git commit and the sweep id; metrics are '<stage>.<metric>';
artifacts are each stage's manifest and reports. SQLite is the default store;
several sweep processes share it, so first contact with the database (which
creates its schema) happens under a file lock.

A run never stays RUNNING after its process is gone: Ctrl-C or SIGTERM ends it KILLED
with the reason in the tag `end_reason`; a process killed outright (SIGKILL, a power
cut) is found by the next run on the same host (the tags `host`, `pid`, `pid_started`
name a process that no longer exists) and marked KILLED the same way.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse

import psutil
from filelock import FileLock

from pipeline.config import Config, flatten, to_plain
from pipeline.code_version import PROJECT_ROOT
from pipeline.runner import StageResult, flat_metrics

REPORT_SUFFIXES = (".md", ".json", ".png", ".svg", ".txt")
MAX_PARAM_LENGTH = 500
MAX_TAG_LENGTH = 5000


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


SERVER_TIMEOUT_S = 5.0


class TrackingError(RuntimeError):
    """The tracking URI cannot be used; the message names it and what to do."""


def check_tracking_server(tracking_uri: str) -> None:
    """An http(s) tracking URI must answer within seconds: MLflow's own client retries for minutes."""
    parsed = urlparse(tracking_uri)
    if parsed.scheme not in ("http", "https"):
        return
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=SERVER_TIMEOUT_S).close()
    except OSError as error:
        raise TrackingError(f"tracking_uri={tracking_uri}: no MLflow server answers at {parsed.hostname}:{port} ({error}); "
                            "start one (`mlflow server`) or leave tracking_uri at its default, sqlite:///mlflow.db") from error


def check_tracking_uri(tracking_uri: str) -> None:
    """A server that answers, or an SQLite database this user can create or write."""
    check_tracking_server(tracking_uri)
    if not tracking_uri.startswith("sqlite:///"):
        return
    database = Path(tracking_uri[len("sqlite:///") :]).expanduser()
    if database.exists() and not database.is_file():
        raise TrackingError(f"tracking_uri={tracking_uri}: {database} is not a file; expected an SQLite database "
                            "(made if missing), e.g. sqlite:///mlflow.db")
    existing = next(parent for parent in (database.parent, *database.parent.parents) if parent.exists())
    writable = database if database.exists() else existing
    if not existing.is_dir() or not os.access(writable, os.W_OK):
        raise TrackingError(f"tracking_uri={tracking_uri}: cannot write {database} (in {existing}); "
                            "choose a path this user can write, e.g. sqlite:///mlflow.db")


def _sqlite_lock(tracking_uri: str) -> FileLock | None:
    if not tracking_uri.startswith("sqlite:///"):
        return None
    database = Path(tracking_uri[len("sqlite:///") :])
    database.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(database) + ".lock")


@contextmanager
def pipeline_run(cfg: Config, sweep_id: str | None = None) -> Iterator["Tracker"]:
    import mlflow

    check_tracking_server(cfg.tracking_uri)
    lock = _sqlite_lock(cfg.tracking_uri)
    mlflow.set_tracking_uri(cfg.tracking_uri)
    if lock is not None:
        with lock:
            experiment_id = _experiment_id(mlflow, cfg.model.name)
    else:
        experiment_id = _experiment_id(mlflow, cfg.model.name)
    close_abandoned_runs(mlflow.tracking.MlflowClient(), experiment_id)
    tags = {"git_commit": git_commit(), "model": cfg.model.name, **this_process()}
    if sweep_id:
        tags["sweep_id"] = sweep_id
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name(cfg), tags=tags) as run:
        params = {key: str(value)[:MAX_PARAM_LENGTH] for key, value in flatten(to_plain(cfg)).items()}
        mlflow.log_params(params)
        try:
            yield Tracker(run.info.run_id)
        except Exception as error:  # the run ends FAILED; say why where the comparison shows it
            mlflow.set_tag("error", str(error)[:MAX_TAG_LENGTH])
            raise
        except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM turned into one by the entry point
            mlflow.set_tag("end_reason", str(interrupt) or "interrupted (Ctrl-C)")
            mlflow.end_run("KILLED")
            raise


def run_name(cfg) -> str:
    """What the run is, from its choices: calibration method, target, model (`kl-tf2ir-mbv1_cifar10`)."""
    method = cfg.calib.method
    return f"{getattr(method, 'value', method)}-{cfg.target.name}-{cfg.model.name}"


def ui_hint(tracking_uri: str) -> str:
    """How to look at the runs: a server is opened in a browser; a local store needs `mlflow ui`."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"open {tracking_uri} in a browser"
    return f"`mlflow ui --backend-store-uri {tracking_uri}`"


def this_process() -> dict[str, str]:
    """Tags that let a later run tell whether this run's process still exists."""
    return {"host": socket.gethostname(), "pid": str(os.getpid()), "pid_started": repr(psutil.Process().create_time())}


def _process_alive(pid: str, started: str) -> bool:
    try:
        return repr(psutil.Process(int(pid)).create_time()) == started  # a reused pid is another process
    except (psutil.NoSuchProcess, ValueError):
        return False


def close_abandoned_runs(client, experiment_id: str) -> list[str]:
    """Mark KILLED the RUNNING runs of this host whose process is gone; their ids."""
    host, closed = socket.gethostname(), []
    for run in client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=1000):
        tags = run.data.tags
        if tags.get("host") != host or "pid" not in tags or _process_alive(tags["pid"], tags.get("pid_started", "")):
            continue
        client.set_tag(run.info.run_id, "end_reason",
                       f"its process (pid {tags['pid']} on {host}) ended without closing the run (killed?); "
                       f"closed by a later run at {time.strftime('%Y-%m-%d %H:%M:%S')}")
        client.set_terminated(run.info.run_id, "KILLED")
        closed.append(run.info.run_id)
    return closed


def _experiment_id(mlflow, name: str) -> str:
    experiment = mlflow.get_experiment_by_name(name)
    return experiment.experiment_id if experiment else mlflow.create_experiment(name)


class Tracker:
    def __init__(self, run_id: str):
        self.run_id = run_id

    def log_stage(self, result: StageResult) -> None:
        import mlflow

        name = result.stage.name
        mlflow.set_tags({f"stage.{name}.key": result.key, f"stage.{name}.reused": str(result.reused).lower()})
        mlflow.log_metrics(flat_metrics([result]))
        mlflow.log_artifact(str(result.artifact.directory / "manifest.json"), artifact_path=name)
        for path in sorted(result.artifact.directory.iterdir()):
            if path.is_file() and path.suffix in REPORT_SUFFIXES and path.name not in ("manifest.json", "graph.json"):
                mlflow.log_artifact(str(path), artifact_path=name)
