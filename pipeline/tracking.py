"""MLflow: one run per pipeline run, in an experiment named after the model (typed as
model development, `mlflow.experimentKind`), named by its choices (`kl-tf2ir-digits`).

- params: the flattened config;
- metrics: each stage's headline metrics ('<stage>.<metric>', the stage table's `headline`),
  and its per-layer series stepped by layer index ('<stage>.<series>.<field>'), so MLflow
  draws a per-layer chart and overlays runs; every metric of the run is in `metrics.json`;
- inputs: the calibration and evaluation data as datasets with their content digests;
- artifacts: at the root, `metrics.json`, `run.json` (each stage's key and whether the store
  served it) and every stage's pictures as `<stage>-<name>.png` (the same paths in every run:
  MLflow's compare view shows root files side by side); under `<stage>/`, its manifest and reports;
- tags: the git commit, the sweep, why a run failed (`error`) or was stopped (`end_reason`).
A Hydra sweep's jobs are nested under one parent run per experiment (`sweep <overrides>`),
created by the first job and closed by the sweep's callback (pipeline/sweep.py).

SQLite is the default store; several sweep processes share it, so first contact
with the database (which creates its schema) happens under a file lock.

A run never stays RUNNING after its process is gone: Ctrl-C or SIGTERM ends it KILLED
with the reason in the tag `end_reason`; a process killed outright (SIGKILL, a power
cut) is found by the next run on the same host (the tags `host`, `pid`, `pid_started`
name a process that no longer exists) and marked KILLED the same way.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time
import warnings
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse, urlsplit

import psutil
from filelock import FileLock

from core.reports.series import SERIES_DIR, read_series
from pipeline.config import Config, flatten, to_plain
from pipeline.code_version import PROJECT_ROOT
from pipeline.hashing import canonical_json, data_digest, sha256_bytes
from pipeline.runner import RunSummary, StageResult

REPORT_SUFFIXES = (".md", ".json", ".svg", ".txt")  # pictures (.png) go to the root
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


# what MLflow's tracking client can store runs in (a bare path is a file store)
TRACKING_SCHEMES = ("sqlite", "http", "https", "file", "postgresql", "mysql", "mssql", "databricks")
SQLITE_HEADER = b"SQLite format 3\x00"
LOCK_WAIT_S = 30.0  # how long a run waits for a tracking database another process holds locked


def check_tracking_uri(tracking_uri: str) -> None:
    """A server that answers, or an SQLite database this user can create or write, that is SQLite, undamaged
    and not held locked by another process for longer than LOCK_WAIT_S."""
    scheme = urlsplit(tracking_uri).scheme.split("+")[0]
    if scheme and scheme not in TRACKING_SCHEMES and len(scheme) > 1:  # one letter: a Windows drive
        raise TrackingError(f"tracking_uri={tracking_uri}: MLflow cannot track runs in a {scheme}:// store; use "
                            f"{', '.join(f'{name}://' for name in TRACKING_SCHEMES)} or a directory, e.g. sqlite:///mlflow.db")
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
    if database.exists() and database.stat().st_size:
        _check_sqlite(tracking_uri, database)


def _check_sqlite(tracking_uri: str, database: Path) -> None:
    """An existing tracking database: SQLite, readable, and writable within LOCK_WAIT_S."""
    with database.open("rb") as stream:
        if stream.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            raise TrackingError(f"tracking_uri={tracking_uri}: {database} is not an SQLite database; point tracking_uri at "
                                "another file (made if missing), or move this one away")
    try:
        connection = sqlite3.connect(database, timeout=LOCK_WAIT_S)
        try:
            connection.execute("PRAGMA quick_check").fetchall()
            connection.execute("BEGIN IMMEDIATE")  # waits for another process's write lock, at most LOCK_WAIT_S
            connection.rollback()
        finally:
            connection.close()
    except sqlite3.OperationalError as error:
        if "locked" in str(error) or "busy" in str(error):
            raise TrackingError(f"tracking_uri={tracking_uri}: {database} stayed locked by another process for "
                                f"{LOCK_WAIT_S:g} s; wait for it to finish, or track this run elsewhere "
                                "(tracking_uri=sqlite:///other.db)") from None
        raise TrackingError(f"tracking_uri={tracking_uri}: {database} cannot be read ({error}); it may be damaged: move it "
                            "away (MLflow makes a new one) or restore it from a backup") from None
    except sqlite3.DatabaseError as error:
        raise TrackingError(f"tracking_uri={tracking_uri}: {database} is damaged ({error}); move it away (MLflow makes a new "
                            "one) or restore it from a backup") from None


def _sqlite_lock(tracking_uri: str) -> FileLock | None:
    if not tracking_uri.startswith("sqlite:///"):
        return None
    database = Path(tracking_uri[len("sqlite:///") :])
    database.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(database) + ".lock")


EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"  # not MLflow 3's GenAI layout
SWEEP_ROLE_TAG = "sweep_role"


@dataclass(frozen=True)
class Sweep:
    """A Hydra multirun: its id (from its directory), directory and the overrides that vary."""

    id: str
    directory: str
    overrides: tuple[str, ...]
    job: int | None = None  # this job's number in the sweep

    @property
    def parent_name(self) -> str:
        return ("sweep " + " ".join(self.overrides))[:250] if self.overrides else f"sweep {self.id}"


@contextmanager
def pipeline_run(cfg: Config, sweep: Sweep | None = None) -> Iterator["Tracker"]:
    import mlflow

    check_tracking_server(cfg.tracking_uri)
    mlflow.set_tracking_uri(cfg.tracking_uri)
    lock = _sqlite_lock(cfg.tracking_uri)
    with lock if lock is not None else nullcontext():  # the client's first contact creates the schema
        client = mlflow.tracking.MlflowClient()
        experiment_id = _experiment_id(client, cfg.model.name)
    close_abandoned_runs(client, experiment_id)
    tags = {"git_commit": git_commit(), "model": cfg.model.name, **this_process()}
    parent_run_id = None
    if sweep is not None:
        tags["sweep_id"] = sweep.id
        if sweep.job is not None:
            tags["sweep_job"] = str(sweep.job)
        parent_run_id = sweep_parent_run(client, experiment_id, sweep)
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name(cfg), tags=tags, parent_run_id=parent_run_id) as run:
        params = {key: "***" if _secret(key) else str(value)[:MAX_PARAM_LENGTH] for key, value in flatten(to_plain(cfg)).items()}
        mlflow.log_params(params)
        log_datasets(cfg)
        try:
            yield Tracker(run.info.run_id)
        except Exception as error:  # the run ends FAILED; say why where the comparison shows it
            mlflow.set_tag("error", str(error)[:MAX_TAG_LENGTH])
            raise
        except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM turned into one by the entry point
            mlflow.set_tag("end_reason", str(interrupt) or "interrupted (Ctrl-C)")
            mlflow.end_run("KILLED")
            raise


SECRET_WORDS = ("secret", "password", "token", "key", "credential")


def _secret(param: str) -> bool:
    """A store option that may hold a credential (store.options.secret, ...client_kwargs.aws_secret_access_key)."""
    return param.startswith("store.options.") and any(word in param.rsplit(".", 1)[-1].lower() for word in SECRET_WORDS)


def sweep_parent_run(client, experiment_id: str, sweep: Sweep) -> str:
    """The sweep's parent run in this experiment, made by whichever job comes first (a lock in the
    sweep directory, which every job of a sweep shares, keeps it to one)."""
    Path(sweep.directory).mkdir(parents=True, exist_ok=True)
    with FileLock(str(Path(sweep.directory) / ".mlflow_parent.lock")):
        found = client.search_runs([experiment_id], filter_string=f"tags.sweep_id = '{sweep.id}' and tags.{SWEEP_ROLE_TAG} = 'parent'",
                                   max_results=1)
        if found:
            return found[0].info.run_id
        run = client.create_run(experiment_id, run_name=sweep.parent_name, tags={
            "sweep_id": sweep.id, SWEEP_ROLE_TAG: "parent", "sweep_dir": sweep.directory, "git_commit": git_commit(),
            "mlflow.note.content": f"Hydra sweep in {sweep.directory}: {' '.join(sweep.overrides)}; its jobs are the nested runs"})
        return run.info.run_id


def log_datasets(cfg: Config) -> None:
    """The calibration and evaluation data as MLflow dataset inputs; a digest names exactly which images."""
    import mlflow
    from mlflow.data.code_dataset_source import CodeDatasetSource
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset

    data = cfg.data
    if data.path and Path(data.path).exists():
        with warnings.catch_warnings():  # MLflow registers its local source twice and warns that it is ambiguous
            warnings.simplefilter("ignore", UserWarning)
            source = resolve_dataset_source(str(Path(data.path).resolve()))
        content = data_digest(Path(data.path))
    else:  # a data set the code makes (the built-in digits): its kind and the split settings say which
        content, source = f"builtin:{data.kind.value}", CodeDatasetSource({"builtin": data.kind.value})
    for context, split, limit in (("calibration", data.calib_split, cfg.calib.num_images), ("evaluation", data.eval_split, data.eval_num_images)):
        selection = {"content": content, "split": split, "limit": limit, "holdout_fraction": data.holdout_fraction,
                     "seed": data.split_seed, "preprocess": to_plain(cfg.model.preprocess)}
        digest = sha256_bytes(canonical_json(selection))[:16]
        mlflow.log_input(MetaDataset(source, name=f"{data.name}:{split}", digest=digest), context=context)


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


def _experiment_id(client, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(name)
    if experiment is None or experiment.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
        client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    return experiment_id


class Tracker:
    def __init__(self, run_id: str):
        self.run_id = run_id

    def log_stage(self, result: StageResult) -> None:
        import mlflow

        stage, directory = result.stage, result.artifact.directory
        mlflow.log_metrics({f"{stage.name}.{name}": value for name, value in stage.headline_of(result.metrics).items()})
        self._log_series(result)
        mlflow.log_artifact(str(directory / "manifest.json"), artifact_path=stage.name)
        for path in sorted(directory.iterdir()):
            if path.is_file() and path.suffix in REPORT_SUFFIXES and path.name not in ("manifest.json", "graph.json"):
                mlflow.log_artifact(str(path), artifact_path=stage.name)
        for path in sorted(directory.glob("*.png")):  # pictures at the root, named by stage: compare shows root files side by side
            with tempfile.TemporaryDirectory() as staging:
                named = Path(staging) / f"{stage.name}-{path.name}"
                shutil.copyfile(path, named)
                mlflow.log_artifact(str(named))

    def _log_series(self, result: StageResult) -> None:
        from mlflow.entities import Metric
        from mlflow.tracking import MlflowClient

        now, metrics = int(time.time() * 1000), []
        for series in result.stage.series:
            path = result.artifact.directory / SERIES_DIR / f"{series.name}.json"
            for row in read_series(path) if path.exists() else []:
                metrics += [Metric(f"{result.stage.name}.{series.name}.{field}", float(row[field]), now, int(row[series.x]))
                            for field in series.y if row.get(field) is not None]
        for start in range(0, len(metrics), 1000):  # MLflow's batch limit
            MlflowClient().log_batch(self.run_id, metrics=metrics[start : start + 1000])

    def mark_quality(self, findings: list) -> None:
        """The tag `quality`: the limits the run's figures broke (a sweep's summary marks such jobs)."""
        import mlflow

        mlflow.set_tag("quality", "; ".join(str(finding) for finding in findings)[:MAX_TAG_LENGTH])

    def log_summary(self, summary: RunSummary) -> None:
        """metrics.json (every metric of the run) and run.json (stage keys, reuse) at the artifact root."""
        import mlflow

        mlflow.log_dict(summary.metrics, "metrics.json")
        mlflow.log_dict({"stages": {r.stage.name: {"key": r.key, "reused": r.reused, "wall_s": round(r.wall_s, 3)}
                                    for r in summary.results}}, "run.json")
