"""What run.py and the DVC entry point share: validate, run, explain failures."""

from __future__ import annotations

import logging
import signal
import tempfile
from pathlib import Path

from omegaconf import DictConfig
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipeline.config import ConfigError, validate
from pipeline.main import ExportError, run_pipeline, write_json_atomic
from pipeline.quality import QUALITY_EXIT, QualityFailed
from pipeline.resources import ResourceError
from pipeline.runner import RunSummary, StageFailed
from pipeline.store import StoreError
from pipeline.tracking import HEADLINE_METRICS, Sweep, TrackingError, experiment_name, run_name, ui_hint
from pipeline.units import figure

log = logging.getLogger(__name__)

# errors whose message already tells the user what to do: no traceback
USER_ERRORS = (ConfigError, ExportError, ResourceError, StageFailed, StoreError, TrackingError)


INTERRUPTED_EXIT = 130


def unwritable_output_dir(argv: list[str]) -> str | None:
    """Why Hydra could not make the run's directory (hydra.run.dir, hydra.sweep.dir; default outputs/ or multirun/
    under the current directory), or None: said in one line before Hydra tries, not as its traceback. The
    directory (its part before any ${...}) is made, as Hydra would make it, and written to once."""
    multirun = any(argument in ("-m", "--multirun") for argument in argv)
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    given = next((argument.split("=", 1)[1] for argument in argv if argument.split("=", 1)[0] == key), None)
    if given is None:
        directory = Path(".")  # the default's outputs/ or multirun/ are made there
    elif "${" in given:  # an interpolation Hydra resolves at run time: the directories before it
        fixed = given.split("${", 1)[0]
        directory = Path(fixed or ".").expanduser() if fixed.endswith("/") or not fixed else Path(fixed).expanduser().parent
    else:
        directory = Path(given).expanduser()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=directory).close()
    except OSError as error:
        return (f"{key}={given or '(default, under the current directory)'}: cannot make the run's directory "
                f"({error.strerror or error}: {error.filename or directory}); choose one this user can write ({key}=PATH)")
    return None


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
    except QualityFailed as failed:
        console.print(stage_table(failed.summary))
        console.print(f"[bold red]stopped:[/bold red] {escape(str(failed))}", highlight=False)
        log.error("%s", failed)
        if sweep is None:
            raise SystemExit(QUALITY_EXIT) from None
        return None
    except USER_ERRORS as error:
        if isinstance(error, StageFailed) and not isinstance(error.error, (ValueError, MemoryError, OSError)):
            console.print_exception()  # not a bad input but a defect: show where
        console.print(f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False)
        log.error("%s", error)
        return None


def stage_table(summary: RunSummary) -> Table:
    """A row per stage: ran or reused, time, headline figures; a figure beyond a quality limit is marked."""
    failed = {(finding.stage, finding.metric) for finding in summary.quality}
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("stage", "ran/reused", "time", "headline"):
        table.add_column(column, no_wrap=column != "headline")
    for result in summary.results:
        figures = ", ".join(f"[bold red]{escape(name)} {figure(name, value)} ✗[/bold red]" if (result.stage.name, name) in failed
                            else escape(f"{name} {figure(name, value)}") for name, value in result.stage.headline_of(result.metrics).items())
        status = "reused" if result.reused else "[green]ran[/green]"
        if any(stage == result.stage.name for stage, _ in failed):
            status += " [bold red]quality ✗[/bold red]"
        table.add_row(result.stage.name, status, f"{result.wall_s:.1f} s", figures)
    return table


def job_line(summary: RunSummary, cfg: DictConfig, sweep: Sweep) -> str:
    """A sweep job in one line: its run, how many stages ran, its time and the sweep's summary figures."""
    ran = sum(1 for result in summary.results if not result.reused)
    seconds = sum(result.wall_s for result in summary.results)
    # the figure carries its unit (`27.77 dB`): the label, written for the sweep table's header, without it
    figures = [f"{label.removesuffix(' dB')} {figure(name, summary.metrics[name])}" for name, label in HEADLINE_METRICS.items()
               if name in summary.metrics]
    quality = " QUALITY: " + "; ".join(str(finding) for finding in summary.quality) if summary.quality else ""
    return (f"job {sweep.job} {run_name(cfg)}: {ran} ran, {len(summary.results) - ran} reused, {seconds:.1f} s; "
            + ", ".join(figures) + quality)


def report_run(summary: RunSummary, cfg: DictConfig, console: Console, output_dir: Path | None = None,
               sweep: Sweep | None = None) -> None:
    """A short table (stage, ran or reused, time, its headline figures) and where everything is (a sweep's
    job: one line, the sweep's table comes at its end); every metric goes to `<output_dir>/metrics.json`
    (Hydra's directory of this run)."""
    if output_dir is not None:
        write_json_atomic(output_dir / "metrics.json", summary.metrics)
    if sweep is not None:
        console.print(escape(job_line(summary, cfg, sweep)), highlight=False)
        return
    console.print(stage_table(summary))
    for finding in summary.quality:  # quality.enforce=false: the run went on, and says what failed
        console.print(f"[bold yellow]quality (not enforced):[/bold yellow] {escape(str(finding))}", highlight=False)
    if output_dir is not None:
        console.print(escape(f"all {len(summary.metrics)} metrics: {output_dir / 'metrics.json'}"))
    console.print(escape(f"MLflow run {run_name(cfg)} ({summary.mlflow_run_id}) in {cfg.tracking_uri} (experiment '{experiment_name(cfg)}'; "
                         f"{ui_hint(cfg.tracking_uri, summary.mlflow_experiment_id)})"))
    if summary.logged_model_id:
        registered = f", registered as {cfg.tracking.register}" if cfg.tracking.register else ""
        console.print(escape(f"logged model models:/{summary.logged_model_id} (MLflow's Models tab; "
                             f"mlflow.search_logged_models()){registered}"))
    if summary.export_dir:
        console.print(escape(f"artifacts exported to {summary.export_dir}/ (metrics.json, run.json, one directory per stage)"))
    else:
        console.print(escape(f"artifacts in the store {cfg.store.url}: " + ", ".join(f"{r.stage.name}/{r.key[:12]}" for r in summary.results)))
