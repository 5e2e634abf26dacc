"""One pipeline run: the stages in order, each reused or run, tracked, exported."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from pipeline.config import Config, to_plain
from pipeline.hashing import one_reading_of_data
from pipeline.preflight import preflight
from pipeline.quality import QualityFailed, findings_of
from pipeline.runner import RunSummary, Runner, StageResult, flat_metrics
from pipeline.stages import Stage, stages_until
from pipeline.store import Artifact, ArtifactStore, RunLease
from pipeline.tracking import Sweep, pipeline_run


log = logging.getLogger(__name__)


class RichDisplay:
    """A progress bar per stage, a line saying whether it ran or was reused; the same lines go to
    `logging` (Hydra's per-job run.log). `label` prefixes a sweep job's lines (`job 1 kl`), which
    parallel jobs interleave."""

    def __init__(self, console: Console, label: str = "", quiet: bool = False):
        # quiet (a sweep's job): the bars vanish when done and the stages' lines go to run.log only; the job
        # says itself in one line at its end (pipeline/sweep.py)
        self.console, self.label, self.quiet = console, label, quiet
        self.bars = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.fields[stage]:<11}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
            transient=quiet,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> "RichDisplay":
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def start(self, stage: Stage, key: str) -> None:
        self.tasks[stage.name] = self.bars.add_task("", total=None, stage=f"{self.label}{stage.name}", status=f"key {key[:12]}")
        log.info("%s%s: key %s", self.label, stage.name, key)

    def progress(self, stage: Stage, done: int, total: int) -> None:
        self.bars.update(self.tasks[stage.name], completed=done, total=total)

    def log(self, stage: Stage, message: str) -> None:
        if not self.quiet:
            self.bars.console.print(f"  [dim]{escape(self.label)}{stage.name}:[/dim] {escape(message)}")
        log.info("%s%s: %s", self.label, stage.name, message)

    def finish(self, stage: Stage, result: StageResult) -> None:
        verdict = "[cyan]reused from the store[/cyan]" if result.reused else "[green]ran[/green]"
        task = self.tasks[stage.name]
        total = self.bars.tasks[task].total or 1
        self.bars.update(task, completed=total, total=total, status=f"{verdict} key {result.key[:12]}")
        log.info("%s%s: %s in %.1f s", self.label, stage.name, "reused from the store" if result.reused else "ran", result.wall_s)


def open_store(cfg: Config) -> ArtifactStore:
    """The configured store, with the build directories of killed runs collected."""
    store = ArtifactStore(cfg.store.url, local_cache=Path(cfg.store.cache_dir).expanduser(), options=to_plain(cfg.store.options))
    store.collect_orphans()
    return store


def run_pipeline(cfg: Config, *, sweep: Sweep | None = None, console: Console | None = None) -> RunSummary:
    console = console or Console(stderr=True)
    stages = stages_until(cfg.until)
    preflight(cfg, stages)
    store = open_store(cfg)
    summary = RunSummary(results=[])
    with one_reading_of_data(), pipeline_run(cfg, sweep=sweep) as tracker:
        summary.mlflow_run_id, summary.mlflow_experiment_id = tracker.run_id, tracker.experiment_id
        lease = RunLease(store, origin="run.py")
        try:
            with RichDisplay(console, label=f"job {sweep.job} " if sweep is not None and sweep.job is not None else "",
                             quiet=sweep is not None) as display:
                runner = Runner(cfg, store, display, lease)
                artifacts: dict[str, Artifact] = {}
                for stage in stages:
                    result = runner.run_stage(stage, {name: artifacts[name] for name in stage.inputs})
                    artifacts[stage.name] = result.artifact
                    summary.results.append(result)
                    tracker.log_stage(result)
                    if _quality_stops(cfg, result, summary, tracker, display):
                        break
        finally:  # what even a failed run computed is worth keeping: `pipeline.store gc` keeps recent runs' entries
            lease.close({result.stage.name: result.key for result in summary.results})
        summary.metrics = flat_metrics(summary.results)
        tracker.log_summary(summary)
        if summary.quality and cfg.quality.enforce:
            raise QualityFailed(summary.quality, summary)
        if not summary.quality:  # a model past a quality limit is not one to ship
            summary.logged_model_id = tracker.log_model(summary, cfg)
        if cfg.export_dir:  # inside the run: an export that fails marks it FAILED
            summary.export_dir = export(summary, Path(cfg.export_dir))
    return summary


def _quality_stops(cfg: Config, result: StageResult, summary: RunSummary, tracker, display: RichDisplay) -> bool:
    """Checks the stage's figures against cfg.quality; whether the run stops here."""
    findings = findings_of(cfg, result.stage.name, result.metrics, result.artifact.directory)
    for finding in findings:
        display.log(result.stage, f"quality: {finding}")
    summary.quality += findings
    if findings:
        tracker.mark_quality(summary.quality)
    return bool(findings) and cfg.quality.enforce


class ExportError(RuntimeError):
    """The artifacts could not be copied to export_dir."""


def export(summary: RunSummary, export_dir: Path) -> Path:
    """PATH/<stage>/ (the artifacts), PATH/metrics.json, PATH/run.json: all copied first, beside them, then each moved
    in place by a rename; an export that fails (a full disk) changes nothing there."""
    try:
        return _export(summary, export_dir)
    except OSError as error:
        raise ExportError(f"export_dir={export_dir}: could not copy the artifacts there ({os_error_text(error)}); they are in the "
                          "store, and the next run with a usable export_dir copies them without computing anything") from None


def os_error_text(error: OSError) -> str:
    """What went wrong, once: shutil.copytree's error gathers one (source, target, reason) per file it could not copy."""
    failures = error.args[0] if isinstance(error, shutil.Error) and error.args and isinstance(error.args[0], list) else []
    if not failures:
        return str(error)
    _, target, reason = failures[0]
    reason = str(reason).split(": '", 1)[0]  # its text names both paths again
    more = f"; {len(failures) - 1} more file(s) likewise" if len(failures) > 1 else ""
    return f"{reason}, writing {target}{more}"


def _export(summary: RunSummary, export_dir: Path) -> Path:
    export_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=export_dir, prefix=".export."))
    try:
        for result in summary.results:
            shutil.copytree(result.artifact.directory, staging / result.stage.name, copy_function=shutil.copy2)
        write_json_atomic(staging / "metrics.json", summary.metrics)
        run_info = {
            "mlflow_run_id": summary.mlflow_run_id,
            "stages": {result.stage.name: {"key": result.key, "reused": result.reused} for result in summary.results},
        }
        write_json_atomic(staging / "run.json", run_info)
        for written in sorted(staging.iterdir()):
            _move_in(written, export_dir / written.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return export_dir


def replace_dir(source: Path, target: Path) -> None:
    """`target` becomes a copy of `source` in one rename (copies, never links: what is written there must not reach a
    store entry's files); a copy that fails leaves `target` as it was and nothing beside it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        shutil.copytree(source, partial, dirs_exist_ok=True, copy_function=shutil.copy2)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _move_in(partial, target)


def _move_in(written: Path, target: Path) -> None:
    """`written` (a file or a directory) renamed to `target`, whatever was there replaced (a rename cannot replace a
    directory: the old one is renamed aside first, then removed)."""
    if written.is_dir() and target.exists():
        retired = target.with_name(f".{target.name}.old")
        shutil.rmtree(retired, ignore_errors=True)
        os.rename(target, retired)
        os.rename(written, target)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(written, target)


def write_json_atomic(path: Path, data: Any) -> None:
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as stream:
        json.dump(data, stream, indent=1, sort_keys=True)
        stream.write("\n")
    os.replace(partial, path)
