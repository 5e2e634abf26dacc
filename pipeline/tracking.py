"""MLflow: one run per pipeline run, in an experiment per model file (`experiment_name`: `mbv1_cifar10/graph.pb`; typed as
model development, `mlflow.experimentKind`), named by its choices (`kl-tf2ir-digits`, then any other
command-line choice and a DVC experiment's name). The experiment carries a shared view of MLflow's runs table
with the headline figures as columns; the link the run prints opens it (MLflow 3 otherwise opens on its GenAI
overview, with no metric column).

- params: the flattened config;
- metrics: each stage's headline metrics ('<stage>.<metric>', the stage table's `headline`); every metric of the
  run is in `metrics.json`;
- tables: each stage's per-layer series, a row per layer with its name (`series/<stage>.<series>.json`);
- inputs: the calibration and evaluation data as datasets with their content digests;
- artifacts: at the root, `metrics.json`, `run.json` (each stage's key and whether the store
  served it) and every stage's pictures as `<stage>-<name>.png` (the same paths in every run:
  MLflow's compare view shows root files side by side); under `<stage>/`, its manifest and reports;
- tags: the git commit, the sweep, a DVC experiment's name, baseline and ref (`dvc_exp_*`), why a run failed
  (`error`) or was stopped (`end_reason`).
A Hydra sweep's jobs are nested under one parent run per experiment (`sweep <overrides>`),
created by the first job and closed by the sweep's callback (pipeline/sweep.py).

SQLite is the default store; several sweep processes share it, so first contact
with the database (which creates its schema) happens under a file lock.

A run never stays RUNNING after its process is gone: Ctrl-C or SIGTERM ends it KILLED
with the reason in the tag `end_reason`; a process killed outright (SIGKILL, a power
cut) is found by the next run on the same host (the tags `host`, `pid`, `pid_started`
name a process that no longer exists) and marked KILLED the same way. Those three tags live only
while a run is RUNNING: whoever closes it deletes them.
"""

from __future__ import annotations

import json
import logging
import os
import re
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

from filelock import FileLock
from hydra.core.hydra_config import HydraConfig

from core.reports.series import SERIES_DIR, read_series
from pipeline.config import Config, flatten, to_plain
from pipeline.code_version import PROJECT_ROOT
from pipeline.hashing import canonical_json, data_digest, sha256_bytes
from pipeline.liveness import PROCESS_TAGS, abandoned, launcher_process, this_process
from pipeline.logged_model import close_abandoned_models, log_model, model_name
from pipeline.runner import RunSummary, StageResult
from pipeline.units import rounded

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
VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # MLflow's UI reads a shared view of the runs table from this experiment tag
HEADLINE_VIEW = "headline"
HEADLINE_PARAMS = ("calib.method", "target.name")
# the figures a run is read by: the runs table's columns, a sweep's summary and each sweep job's line
HEADLINE_METRICS = {"annotate.top1": "top-1", "annotate.sqnr_db_min": "SQNR dB",
                    "simulate.end_point_agreement": "int==ref", "codegen.bitexact": "C exact"}


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
    """The run's MLflow run, open while the pipeline runs; a tracking store that cannot be written (a full disk) is one
    TrackingError naming it, however far the run got."""
    with _full_disk_named(cfg.tracking_uri), _mlflow_run(cfg, sweep) as tracker:
        yield tracker


@contextmanager
def _mlflow_run(cfg: Config, sweep: Sweep | None) -> Iterator["Tracker"]:
    import mlflow

    check_tracking_server(cfg.tracking_uri)
    mlflow.set_tracking_uri(cfg.tracking_uri)
    lock = _sqlite_lock(cfg.tracking_uri)
    with lock if lock is not None else nullcontext():  # the client's first contact creates the schema
        client = mlflow.tracking.MlflowClient()
        experiment_id = _experiment_id(client, experiment_name(cfg))
    close_abandoned_runs(client, experiment_id)
    close_abandoned_models(client, experiment_id)
    tags = {"git_commit": git_commit(), "model": cfg.model.name, **this_process(), **dvc_experiment_tags()}
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
            yield Tracker(run.info.run_id, experiment_id)
        except Exception as error:  # the run ends FAILED; say why where the comparison shows it, if the store still takes it
            _as_far_as_it_goes(mlflow.set_tag, "error", str(error)[:MAX_TAG_LENGTH])
            raise
        except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM turned into one by the entry point
            mlflow.set_tag("end_reason", str(interrupt) or "interrupted (Ctrl-C)")
            mlflow.end_run("KILLED")
            raise
        finally:  # closed by its own process: nothing left for a later run to check
            forget_process(client, run.info.run_id)


FULL_DISK = ("database or disk is full", "No space left on device")


def _full(error: BaseException) -> bool:
    return any(words in str(error) for words in FULL_DISK)


class _FullDiskNotLogged(logging.Filter):
    """MLflow logs each failed database write with its traceback before it raises: a full disk's is said once, by
    _full_disk_named."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and record.exc_info[1] is not None and _full(record.exc_info[1]))


@contextmanager
def _full_disk_named(tracking_uri: str) -> Iterator[None]:
    """MLflow's own failures of a full disk named once; the store's and the stages' are theirs to name."""
    from mlflow.exceptions import MlflowException

    database_log = logging.getLogger("mlflow.store.db.utils")
    if not any(isinstance(existing, _FullDiskNotLogged) for existing in database_log.filters):
        database_log.addFilter(_FullDiskNotLogged())
    try:
        yield
    except (MlflowException, sqlite3.Error) as error:
        if not _full(error):
            raise
        raise TrackingError(f"tracking_uri={tracking_uri}: the disk that holds the tracking store is full (MLflow: "
                            f"{str(error).splitlines()[0]}); free space there or point tracking_uri at another disk. What the "
                            "stages computed is in the store: the next run reuses it") from None


def _as_far_as_it_goes(write, *args) -> None:
    """A write to MLflow while a run fails: skipped where the store cannot take it (the failure is what is reported)."""
    from mlflow.exceptions import MlflowException

    try:
        write(*args)
    except (MlflowException, OSError):
        pass


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
            "mlflow.note.content": f"Hydra sweep in {sweep.directory}: {' '.join(sweep.overrides)}; its jobs are the nested runs",
            **launcher_process(sweep.directory)})
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


NAMED_CHOICES = ("calib.method", "target", "model")  # what run_name's first part already says
# keys that say where things are, not what is computed: no part of a run's name (its params have them)
PLACE_KEYS = re.compile(r"(export_dir|tracking_uri|store\..*|limits\..*|hydra.*|.*\.(path|url|sha256))")
MAX_RUN_NAME = 250


def run_name(cfg) -> str:
    """What the run is, from its choices: calibration method, target, model (`kl-tf2ir-mbv1_cifar10`), then
    every other choice the user made on the command line (`codegen.cflags=[-O3]`) and the DVC experiment's
    name, so that runs that differ only in another key are told apart in MLflow's table."""
    method = cfg.calib.method
    name = " ".join([f"{getattr(method, 'value', method)}-{cfg.target.name}-{cfg.model.name}", *command_line_choices(),
                     *(f"exp={experiment}" for experiment in [os.environ.get("DVC_EXP_NAME")] if experiment)])
    return name[:MAX_RUN_NAME]


def command_line_choices() -> list[str]:
    """This Hydra job's overrides beyond those run_name names (none outside run.py)."""
    if not HydraConfig.initialized():
        return []
    overrides = HydraConfig.get().overrides.task
    keys = [(item, item.split("=", 1)[0].lstrip("+~")) for item in overrides]
    return [item for item, key in keys if key not in NAMED_CHOICES and not PLACE_KEYS.fullmatch(key)]


def dvc_experiment_tags() -> dict[str, str]:
    """Inside `dvc exp run` (also --temp and queued): the experiment's name, its baseline commit and the git
    ref DVC keeps it under (`git show <ref>`, `dvc exp apply <name>`); the commit the code came from is the
    baseline's."""
    name, baseline = os.environ.get("DVC_EXP_NAME"), os.environ.get("DVC_EXP_BASELINE_REV")
    if not name or not baseline:
        return {}
    return {"dvc_exp_name": name, "dvc_exp_baseline": baseline, "dvc_exp_ref": f"refs/exps/{baseline[:2]}/{baseline[2:]}/{name}",
            "git_commit": baseline}


def experiment_page(experiment_id: str) -> str:
    """The experiment's runs table (not MLflow 3's GenAI overview, which a browser opens on by default) in
    the headline view (headline_view's columns), as a path under the UI's address."""
    return f"#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={HEADLINE_VIEW}"


def ui_hint(tracking_uri: str, experiment_id: str | None = None) -> str:
    """How to look at the runs: a server's page is opened in a browser; a local store needs `mlflow ui` first."""
    page = experiment_page(experiment_id) if experiment_id else ""
    if tracking_uri.startswith(("http://", "https://")):
        return f"open {tracking_uri.rstrip('/')}/{page} in a browser"
    then = f", then open http://127.0.0.1:5000/{page}" if page else ""
    return f"`mlflow ui --backend-store-uri {tracking_uri}`{then}"


def forget_process(client, run_id: str) -> None:
    """The run's PROCESS_TAGS deleted, as far as the tracking store lets: this runs while a run ends, perhaps because the
    store failed, and must not hide why (a tag left behind only crowds the page; only RUNNING runs are checked)."""
    from mlflow.exceptions import MlflowException

    try:
        for tag in PROCESS_TAGS:
            client.delete_tag(run_id, tag)
    except (MlflowException, OSError):
        pass


def close_abandoned_runs(client, experiment_id: str) -> list[str]:
    """Mark KILLED the RUNNING runs of this host whose process is gone; their ids."""
    host, closed = socket.gethostname(), []
    for run in client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=1000):
        tags = run.data.tags
        if not abandoned(tags):
            continue
        client.set_tag(run.info.run_id, "end_reason",
                       f"its process (pid {tags['pid']} on {host}) ended without closing the run (killed?); "
                       f"closed by a later run at {time.strftime('%Y-%m-%d %H:%M:%S')}")
        client.set_terminated(run.info.run_id, "KILLED")
        forget_process(client, run.info.run_id)  # end_reason names the process
        closed.append(run.info.run_id)
    return closed


def experiment_name(cfg) -> str:
    """One experiment per model file: the model's name, then its file's name where one is given
    (`keras_cifar10/pretrainedResnet.h5` and `keras_cifar10/pretrainedResnet_quant.tflite` are two models); a built-in
    model's name alone (`digits`)."""
    source = cfg.model.file.path or urlparse(cfg.model.file.url or "").path
    return f"{cfg.model.name}/{Path(source).name}" if source else cfg.model.name


def _experiment_id(client, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(name)
    tags = experiment.tags if experiment else {}
    for key, value in ((EXPERIMENT_KIND_TAG, EXPERIMENT_KIND), (VIEW_TAG_PREFIX + HEADLINE_VIEW, headline_view())):
        if tags.get(key) != value:
            client.set_experiment_tag(experiment_id, key, value)
    return experiment_id


def headline_view() -> str:
    """The runs table's shared view state (MLflow's `viewStateShareKey`): the choices and headline figures as columns
    (MLflow 3 shows no metric column until one is picked)."""
    columns = [f"params.`{param}`" for param in HEADLINE_PARAMS] + [f"metrics.`{metric}`" for metric in HEADLINE_METRICS]
    return json.dumps({"selectedColumns": columns}, separators=(",", ":"))


class Tracker:
    def __init__(self, run_id: str, experiment_id: str):
        self.run_id, self.experiment_id = run_id, experiment_id

    def log_stage(self, result: StageResult) -> None:
        import mlflow

        stage, directory = result.stage, result.artifact.directory
        # to the precision each means: MLflow's pages print every digit (metrics.json, logged with the summary, has them)
        mlflow.log_metrics({f"{stage.name}.{name}": rounded(name, value) for name, value in stage.headline_of(result.metrics).items()})
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
        """Each per-layer series as an MLflow table (`series/<stage>.<series>.json`: its index, layer name and values, a
        row per layer), never as a metric: a metric's chart has steps, not layer names, and its run-page value is the
        last layer's."""
        import mlflow

        for series in result.stage.series:
            path = result.artifact.directory / SERIES_DIR / f"{series.name}.json"
            rows = read_series(path) if path.exists() else []
            if rows:
                columns = [series.x, series.label, *series.y]
                mlflow.log_table({column: [row.get(column) for row in rows] for column in columns},
                                 artifact_file=f"{SERIES_DIR}/{result.stage.name}.{series.name}.json", run_id=self.run_id)

    def log_model(self, summary: RunSummary, cfg: Config) -> str | None:
        """The run's deployable result as an MLflow logged model (pipeline/logged_model.py), registered as
        `tracking.register` asks; its id, or None when the run did not reach codegen."""
        results = {result.stage.name: result for result in summary.results}
        if "codegen" not in results:
            return None
        method = getattr(cfg.calib.method, "value", cfg.calib.method)
        headline = {f"{result.stage.name}.{name}": rounded(name, value) for result in summary.results
                    for name, value in result.stage.headline_of(result.metrics).items()}
        return log_model(
            experiment_id=self.experiment_id, run_id=self.run_id, name=model_name(cfg.model.name, cfg.target.name, str(method)),
            content_key=results["codegen"].key,
            ir_dir=results["emit_ir"].artifact.directory, codegen_dir=results["codegen"].artifact.directory,
            calibration_dir=results["calibrate"].artifact.directory if "calibrate" in results else None,
            params={"model": cfg.model.name, "target": cfg.target.name, "calib.method": str(method), "scheme": cfg.target.scheme.name},
            metrics=headline, metadata={"target": cfg.target.name, "scheme": cfg.target.scheme.name, "mlflow_run_id": self.run_id},
            register=cfg.tracking.register)

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
