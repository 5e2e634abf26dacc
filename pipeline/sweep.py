"""Hydra sweeps (`python run.py -m calib.method=minmax,kl,mse`): what a job knows of its sweep,
and the callback (conf/config.yaml's `hydra.callbacks`) that ends one: it closes the sweep's
MLflow parent runs, prints one table of every job (its run, status, headline figures, or why it
failed), writes it to `<sweep dir>/summary.md`, and exits non-zero when no job succeeded.
It runs in the process that launched the sweep, whatever the launcher (basic, joblib, submitit)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any

import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipeline.liveness import record_launcher
from pipeline.tracking import HEADLINE_METRICS, MAX_PARAM_LENGTH, SWEEP_ROLE_TAG, Sweep, check_tracking_server, forget_process

SUMMARY_FILE = "summary.md"
JOB_LOG = "run.log"  # Hydra's per-job log (conf/config.yaml's job_logging): the stages' lines and the error


def sweep_of(directory: str, job: int | None = None) -> Sweep:
    """The sweep whose jobs write under `directory`: its id is the directory's digest, its overrides
    those Hydra recorded in multirun.yaml (what varies)."""
    overrides: tuple[str, ...] = ()
    try:
        recorded = yaml.safe_load((Path(directory) / "multirun.yaml").read_text()) or {}
        overrides = varying(recorded.get("hydra", {}).get("overrides", {}).get("task", []))
    except (OSError, yaml.YAMLError, AttributeError, OverrideParseException):
        pass
    return Sweep(id=hashlib.sha256(directory.encode()).hexdigest()[:12], directory=directory, overrides=overrides, job=job)


def varying(overrides: list[str]) -> tuple[str, ...]:
    """The overrides that make the sweep (`calib.method=minmax,kl`), not those every job shares."""
    parsed = OverridesParser.create().parse_overrides([str(item) for item in overrides])
    return tuple(override.input_line for override in parsed if override.is_sweep_override() and override.input_line is not None)


# launchers that come with an extra: (the Hydra plugin module, the extra's install command)
LAUNCHER_EXTRAS = {"submitit_local": ("hydra_plugins.hydra_submitit_launcher", "make setup-slurm"),
                   "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "make setup-slurm")}


def missing_launcher(argv: list[str]) -> str | None:
    """Why `hydra/launcher=<name>` cannot run here (its extra is not installed), or None."""
    for argument in argv:
        name = argument.split("=", 1)[1] if argument.startswith("hydra/launcher=") else None
        if name in LAUNCHER_EXTRAS and importlib.util.find_spec(LAUNCHER_EXTRAS[name][0]) is None:
            return (f"hydra/launcher={name} needs Hydra's submitit launcher, which is not installed; install the project's "
                    f"`slurm` extra: `{LAUNCHER_EXTRAS[name][1]}` (or `.venv/bin/pip install -r requirements-slurm.lock`)")
    return None


def current_sweep() -> Sweep | None:
    """This Hydra job's sweep, or None outside a multirun."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    return sweep_of(str(hydra_cfg.sweep.dir), job=hydra_cfg.job.num)


def sweep_runs(tracking_uri: str, sweep: Sweep) -> tuple[list[Any], list[Any]]:
    """(parent runs, job runs) of the sweep across every experiment, jobs in job order."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=f"tags.sweep_id = '{sweep.id}'", max_results=5000) if experiments else []
    parents = [run for run in runs if run.data.tags.get(SWEEP_ROLE_TAG) == "parent"]
    jobs = sorted((run for run in runs if run.data.tags.get(SWEEP_ROLE_TAG) != "parent"),
                  key=lambda run: int(run.data.tags.get("sweep_job", "0")))
    return parents, jobs


def override_key(override: str) -> str:
    """`calib.method=minmax,kl` -> `calib.method`; a group's choice (`target=a,b`) is its `name` param."""
    return override.split("=", 1)[0].lstrip("+~")


def choice_of(run: Any, key: str) -> str:
    """What the job took for a varying key: its param, or, for a config group, the group's `name`."""
    params = run.data.params
    return params.get(key, params.get(f"{key}.name", "?"))


def metric_columns(rank_by: list[str]) -> dict[str, str]:
    """The table's figures: the headline metrics and those the verdict ranks by, each with its label."""
    return {**HEADLINE_METRICS, **{entry.removeprefix("-"): entry.removeprefix("-") for entry in rank_by
                                   if entry.removeprefix("-") not in HEADLINE_METRICS}}


def summary_rows(jobs: list[Any], job_dirs: list[Path], varying_keys: tuple[str, ...] = (),
                 columns: dict[str, str] = HEADLINE_METRICS) -> list[list[str]]:
    """A row per job, tracked in MLflow or not: job, what it varied (its run's name where nothing varies), status, the
    figures, why it failed."""
    rows = []
    for run in jobs:
        metrics = run.data.metrics
        quality = run.data.tags.get("quality")  # a limit the job's figures broke (pipeline/quality.py)
        name = " ".join(choice_of(run, key) for key in varying_keys) or run.info.run_name
        rows.append([run.data.tags.get("sweep_job", "?"), name, f"{run.info.status}{' QUALITY' if quality else ''}",
                     *(f"{metrics[metric]:.4g}" if metric in metrics else "" for metric in columns),
                     run.data.tags.get("error", "") or (f"quality (not enforced): {quality}" if quality else "")])
    tracked = {run.data.tags.get("sweep_job") for run in jobs}
    for directory in job_dirs:  # a job refused before its run began (a bad value, a missing input)
        if directory.name not in tracked:
            rows.append([directory.name, "", "FAILED", *("" for _ in columns), f"before any stage ran; its log: {directory / JOB_LOG}"])
    return sorted(rows, key=lambda row: int(row[0]) if row[0].isdigit() else -1)


def differing(rows: list[list[str]], columns: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(the figure columns whose values differ between the finished jobs, {label: value} of those equal in every one)."""
    finished = [row for row in rows if row[2].startswith("FINISHED")]
    shown, same = {}, {}
    for position, (metric, label) in enumerate(columns.items(), start=3):
        values = {row[position] for row in finished}
        if len(finished) > 1 and len(values) == 1 and "" not in values:
            same[label] = values.pop()
        else:
            shown[metric] = label
    return shown, same


def summary_table(rows: list[list[str]], tracked: int, columns: dict[str, str], choice_label: str = "run") -> Table:
    """The figures that differ between jobs as a table (narrow enough for a terminal); why jobs failed goes beneath it."""
    shown, _ = differing(rows, columns)
    positions = [3 + list(columns).index(metric) for metric in shown]
    table = Table(title=f"sweep: {len(rows)} job(s), {tracked} tracked in MLflow", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    # the figures never wrap or shorten (a terminal of 80 columns, CI's log); a long choice folds at its spaces
    for name in ["job", choice_label, "status", *shown.values()]:
        table.add_column(name, overflow="fold", ratio=1) if name == choice_label else table.add_column(name, no_wrap=True, min_width=len(name))
    for row in rows:
        table.add_row(*row[:3], *(row[position] for position in positions))
    return table


def rank_rule(rank_by: list[str]) -> str:
    """sweep.rank_by in words."""
    parts = [f"{entry.removeprefix('-')} ({'lower' if entry.startswith('-') else 'higher'} is better)" for entry in rank_by]
    return "by " + ", then ".join(parts) + ", among the jobs that finished and passed every quality guard (sweep.rank_by)"


def _qualified(jobs: list[Any]) -> list[Any]:
    return [run for run in jobs if run.info.status == "FINISHED" and not run.data.tags.get("quality")]


def _rank(run: Any, rank_by: list[str]) -> tuple[float, ...]:
    metrics = run.data.metrics
    return tuple(-metrics.get(entry[1:], float("inf")) if entry.startswith("-") else metrics.get(entry, float("-inf")) for entry in rank_by)


def best_job(jobs: list[Any], rank_by: list[str]) -> Any | None:
    """The job that finished with no quality finding and ranks first by `rank_by` (sweep.rank_by: the first metric decides,
    the next break ties; '-' ranks lower first; a job without a later metric ranks last on it); None when no job
    qualifies or none gives the first metric (a tf2ir job has no codegen.accel_cycles: nothing to rank by). Of jobs that
    tie on every metric, the first (tied_jobs names them all)."""
    ranked = [run for run in _qualified(jobs) if rank_by and rank_by[0].removeprefix("-") in run.data.metrics]
    return max(ranked, key=lambda run: _rank(run, rank_by), default=None)


def tied_jobs(jobs: list[Any], rank_by: list[str]) -> list[Any]:
    """The qualified jobs that rank equal with the best on every metric of `rank_by`, the best first (one: no tie)."""
    best = best_job(jobs, rank_by)
    if best is None:
        return []
    return [best, *(run for run in _qualified(jobs) if run is not best and _rank(run, rank_by) == _rank(best, rank_by))]


def unrankable(jobs: list[Any], rank_by: list[str]) -> bool:
    """Whether the jobs ran the stage of sweep.rank_by's first metric, finished, and none gives that metric: a rule
    these jobs cannot be ranked by (`-codegen.accel_cycles` on tf2ir), not a sweep stopped before the stage (until)."""
    first = rank_by[0].removeprefix("-")
    qualified = _qualified(jobs)
    ran = any(name.startswith(f"{first.partition('.')[0]}.") for run in qualified for name in run.data.metrics)
    return ran and not any(first in run.data.metrics for run in qualified)


def verdict_line(jobs: list[Any], rank_by: list[str], varying_keys: tuple[str, ...]) -> str:
    """The sweep's winner and the rule that chose it, in one line; a tie names every job of it, and a first metric no
    job gives is said, not ranked on."""
    qualified = _qualified(jobs)
    if not qualified:
        return "best: none (no job finished and passed every quality guard)"
    tied = tied_jobs(jobs, rank_by)
    first = rank_by[0].removeprefix("-")
    if not tied and not unrankable(jobs, rank_by):
        return f"best: none: no job ran {first.partition('.')[0]} (until), whose {first} sweep.rank_by ranks by first"
    if not tied:
        given = sorted({name for run in qualified for name in run.data.metrics if name.count(".") == 1})
        return (f"best: none: no job gives {first}, the first metric of sweep.rank_by (its stage ran: a metric of another target or "
                f"setting); they give {', '.join(given)}")
    best = tied[0]
    figures = ", ".join(f"{entry.removeprefix('-')} {best.data.metrics[entry.removeprefix('-')]:.4g}" for entry in rank_by
                        if entry.removeprefix("-") in best.data.metrics)
    named = [f"job {run.data.tags.get('sweep_job', '?')} ({' '.join(f'{key}={choice_of(run, key)}' for key in varying_keys) or run.info.run_name})"
             for run in tied]
    if len(named) > 1:
        return f"best: a tie of {' and '.join(named)}: each {figures}; ranked {rank_rule(rank_by)}"
    return f"best: {named[0]}: {figures}; ranked {rank_rule(rank_by)}"


def log_parent_figures(client: Any, parent_run_id: str, jobs: list[Any], rank_by: list[str]) -> None:
    """The sweep's parent run, a row in MLflow's table like its jobs: the params every job shares, each varying
    param as the values it took (`a | b`), and the best job's headline metrics (`<stage>.<name>`) in the
    same columns its jobs use, with the tags `best_job` saying whose they are and `best_rule` by what rule."""
    from mlflow.entities import Metric, Param, RunTag

    if not jobs:
        return
    values: dict[str, list[str]] = {}
    for run in jobs:
        for key, value in run.data.params.items():
            values.setdefault(key, []).append(value)
    params = [Param(key, " | ".join(dict.fromkeys(taken))[:MAX_PARAM_LENGTH]) for key, taken in sorted(values.items())]
    tied = tied_jobs(jobs, rank_by)
    metrics = [] if not tied else [Metric(name, value, 0, 0) for name, value in tied[0].data.metrics.items() if name.count(".") == 1]
    tags = [RunTag("best_rule", rank_rule(rank_by))]
    if tied:
        tags.append(RunTag("best_job", " tied with ".join(f"{run.data.tags.get('sweep_job', '?')} ({run.info.run_name})" for run in tied)))
    for start in range(0, max(len(params), len(metrics)), 100):  # MLflow's batch limit on params
        client.log_batch(parent_run_id, metrics=metrics[start:start + 100], params=params[start:start + 100],
                         tags=tags if start == 0 else [])


def summary_markdown(rows: list[list[str]], columns: dict[str, str], choice_label: str, verdict: str) -> str:
    header = ["job", choice_label, "status", *columns, "why it failed"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "/").replace("\n", " ") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + f"\n\n{verdict}\n"


def _launcher_output(directory: Path) -> str:
    """Where a launcher that runs jobs elsewhere (submitit) kept their console output."""
    if (directory / ".submitit").is_dir():
        return f"; their console output: {directory}/.submitit/<id>/<id>_0_log.err"
    return ""


def _job_dirs(directory: Path) -> list[Path]:
    """Hydra's per-job directories (`<sweep dir>/<job number>`), made for every job that started."""
    return sorted(path for path in directory.iterdir() if path.is_dir() and path.name.isdigit()) if directory.is_dir() else []


class SweepSummary(Callback):
    """Ends a sweep: parent runs closed, the jobs' table printed and saved, exit 1 if none succeeded or, their stage run,
    none gives the metric sweep.rank_by ranks by first."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        record_launcher(str(config.hydra.sweep.dir))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        import mlflow

        directory = Path(str(config.hydra.sweep.dir))
        sweep = sweep_of(str(directory))
        check_tracking_server(config.tracking_uri)
        parents, jobs = sweep_runs(config.tracking_uri, sweep)
        job_dirs = _job_dirs(directory)
        job_count = len(set(path.name for path in job_dirs) | {run.data.tags.get("sweep_job") for run in jobs})
        succeeded = sum(1 for run in jobs if run.info.status == "FINISHED")
        rank_by = list(config.sweep.rank_by)
        keys = tuple(dict.fromkeys(override_key(override) for override in sweep.overrides))
        columns = metric_columns(rank_by)
        choice_label = " ".join(keys) or "run"
        rows = summary_rows(jobs, job_dirs, keys, columns)
        verdict = verdict_line(jobs, rank_by, keys)
        markdown = summary_markdown(rows, columns, choice_label, verdict)
        (directory / SUMMARY_FILE).write_text(markdown)
        client = mlflow.tracking.MlflowClient(tracking_uri=config.tracking_uri)
        for parent in parents:
            client.log_text(parent.info.run_id, markdown, SUMMARY_FILE)
            log_parent_figures(client, parent.info.run_id, [run for run in jobs if run.info.experiment_id == parent.info.experiment_id],
                               rank_by)
            client.set_terminated(parent.info.run_id, "FINISHED" if succeeded else "FAILED")
            forget_process(client, parent.info.run_id)
        console = Console(stderr=True, soft_wrap=True)
        console.print(summary_table(rows, len(jobs), columns, choice_label))
        _, same = differing(rows, columns)
        if same:
            console.print(escape("the same in every finished job: " + ", ".join(f"{label} {value}" for label, value in same.items())),
                          highlight=False)
        for row in rows:
            if row[-1]:
                console.print(escape(f"job {row[0]} {row[1]} failed: {row[-1]}"), highlight=False)
        console.print(escape(verdict), highlight=False)
        console.print(escape(f"{succeeded} of {job_count} job(s) succeeded; table in {directory / SUMMARY_FILE}; each job's log: "
                             f"{directory}/<job>/{JOB_LOG}{_launcher_output(directory)}"), highlight=False)
        if job_count and not succeeded:
            raise SystemExit(1)
        if unrankable(jobs, rank_by):
            raise SystemExit(1)  # the ranking asked for could not be made: not a verdict to act on
