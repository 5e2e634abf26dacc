"""What run.py and the DVC entry point share: validate, run, explain failures."""

from __future__ import annotations

import signal

from omegaconf import DictConfig
from rich.console import Console
from rich.markup import escape

from pipeline.config import ConfigError, validate
from pipeline.main import ExportError, run_pipeline
from pipeline.resources import ResourceError
from pipeline.runner import RunSummary, StageFailed
from pipeline.store import StoreError
from pipeline.tracking import TrackingError, run_name, ui_hint

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


def run_or_explain(cfg: DictConfig, console: Console, sweep_id: str | None = None) -> RunSummary | None:
    try:
        typed = validate(cfg)
        return run_pipeline(typed, sweep_id=sweep_id, console=console)
    except KeyboardInterrupt as interrupt:
        explain_interrupt(interrupt, console)
        raise SystemExit(INTERRUPTED_EXIT) from None
    except USER_ERRORS as error:
        if isinstance(error, StageFailed) and not isinstance(error.error, (ValueError, MemoryError, OSError)):
            console.print_exception()  # not a bad input but a defect: show where
        console.print(f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False)
        return None


def report_run(summary: RunSummary, cfg: DictConfig, console: Console) -> None:
    reused = [result.stage.name for result in summary.results if result.reused]
    ran = [result.stage.name for result in summary.results if not result.reused]
    console.print(f"ran: {', '.join(ran) or 'nothing'}; reused from the store: {', '.join(reused) or 'nothing'}")
    for name, value in sorted(summary.metrics.items()):
        if not name.endswith(("wall_s", "compute_s")):
            console.print(f"  {name} = {value:.6g}")
    console.print(escape(f"MLflow run {run_name(cfg)} ({summary.mlflow_run_id}) in {cfg.tracking_uri} (experiment '{cfg.model.name}'; "
                         f"{ui_hint(cfg.tracking_uri)})"))
    if summary.export_dir:
        console.print(escape(f"artifacts exported to {summary.export_dir}/ (metrics.json, run.json, one directory per stage)"))
    else:
        console.print(escape(f"artifacts in the store {cfg.store.url}: " + ", ".join(f"{r.stage.name}/{r.key[:12]}" for r in summary.results)))
