"""What run.py and the DVC entry point share: validate, run, explain failures."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

from omegaconf import DictConfig
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipeline.config import ConfigError, validate
from pipeline.main import ExportError, run_pipeline, write_json_atomic
from pipeline.resources import ResourceError
from pipeline.runner import RunSummary, StageFailed
from pipeline.store import StoreError
from pipeline.tracking import Sweep, TrackingError, run_name, ui_hint

log = logging.getLogger(__name__)

# errors whose message already tells the user what to do: no traceback
USER_ERRORS = (ConfigError, ExportError, ResourceError, StageFailed, StoreError, TrackingError)


INTERRUPTED_EXIT = 130


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"terminated ({signal.Signals(signum).name})")


def interrupt_on_sigterm() -> None:
    """SIGTERM (a scheduler's cancel, `kill`) unwinds like Ctrl-C: build directory removed, MLflow run KILLED."""
    try:
        signal.signal(signal.SIGTERM, _terminated)
    except ValueError:  # not the main thread (a launcher's worker thread): the launcher owns signals
        pass


def explain_interrupt(interrupt: KeyboardInterrupt, console: Console) -> None:
    console.print(f"[bold yellow]stopped:[/bold yellow] {escape(str(interrupt) or 'interrupted (Ctrl-C)')}", highlight=False)


def run_or_explain(cfg: DictConfig, console: Console, sweep: Sweep | None = None) -> RunSummary | None:
    try:
        typed = validate(cfg)
        return run_pipeline(typed, sweep=sweep, console=console)
    except KeyboardInterrupt as interrupt:
        explain_interrupt(interrupt, console)
        raise SystemExit(INTERRUPTED_EXIT) from None
    except USER_ERRORS as error:
        if isinstance(error, StageFailed) and not isinstance(error.error, (ValueError, MemoryError, OSError)):
            console.print_exception()  # not a bad input but a defect: show where
        console.print(f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False)
        log.error("%s", error)
        return None


def report_run(summary: RunSummary, cfg: DictConfig, console: Console, output_dir: Path | None = None) -> None:
    """A short table (stage, ran or reused, time, its headline figures) and where everything is;
    every metric goes to `<output_dir>/metrics.json` (Hydra's directory of this run)."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("stage", "", "time", "headline"):
        table.add_column(column, no_wrap=column != "headline")
    for result in summary.results:
        figures = ", ".join(f"{name} {value:.4g}" for name, value in result.stage.headline_of(result.metrics).items())
        table.add_row(result.stage.name, "reused" if result.reused else "[green]ran[/green]", f"{result.wall_s:.1f} s", escape(figures))
    console.print(table)
    if output_dir is not None:
        write_json_atomic(output_dir / "metrics.json", summary.metrics)
        console.print(escape(f"all {len(summary.metrics)} metrics: {output_dir / 'metrics.json'}"))
    console.print(escape(f"MLflow run {run_name(cfg)} ({summary.mlflow_run_id}) in {cfg.tracking_uri} (experiment '{cfg.model.name}'; "
                         f"{ui_hint(cfg.tracking_uri)})"))
    if summary.export_dir:
        console.print(escape(f"artifacts exported to {summary.export_dir}/ (metrics.json, run.json, one directory per stage)"))
    else:
        console.print(escape(f"artifacts in the store {cfg.store.url}: " + ", ".join(f"{r.stage.name}/{r.key[:12]}" for r in summary.results)))
