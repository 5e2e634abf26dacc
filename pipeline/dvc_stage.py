"""dvc.yaml's entry point: `python -m pipeline.dvc_stage <stage>` runs one declared
stage through the same Runner and store as run.py, reading the composed config
from params.yaml and its inputs from the upstream stages' DVC outputs;
`python -m pipeline.dvc_stage --track` records the whole run in MLflow.

What a stage leaves for DVC:
- `dvc_artifacts/<stage>/`: a copy of the store entry's files, which DVC's cache links (`cache.type = hardlink` in
  .dvc/config): an edit of this output in place never reaches the store;
- `metrics/<stage>.json`: the stage's headline metrics, git-tracked (`cache: false`), so an
  experiment's commit carries them all;
- `metrics.json` (the track stage): DVC's one metrics file, the few figures a run is judged by (SUMMARY_METRICS:
  accuracy, SQNR, bit-exactness, clipping, sizes, cycles), what `dvc metrics show`, `dvc exp show` and
  `dvc metrics diff` compare, a short table;
- `plots/<stage>/<series>.json`: its per-layer series, git-tracked, drawn by `dvc plots show/diff` against the
  layer names (`.dvc/plots/layers.json`); a series this configuration does not give is an empty list, so its
  revision draws no points (no placeholder on the other revisions' axis), and the chart's title says when it is absent;
- `pictures/<stage>/`: copies of the PNGs it drew (cached by DVC), shown as image plots; a picture this
  configuration does not draw is a small card that says why (core/reports/absent.py).
Whether the store served the stage is bookkeeping, not a metric: `dvc_artifacts/status/<stage>.json`.

`dvc exp run --temp` and queued experiments run in a copy of the repository that DVC throws away:
the store, the download cache and an SQLite tracking database named relatively are resolved against
the repository the user works in (DVC_ROOT), as are input paths that lead outside the copy (../shared),
so what the experiment computed and tracked outlives the copy; its MLflow run is tagged with the
experiment's name, baseline and ref (pipeline/tracking.py)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from core.reports.absent import absent_card
from core.reports.series import SERIES_DIR, read_series
from rich.console import Console
from rich.markup import escape

from pipeline.cli import INTERRUPTED_EXIT, USER_ERRORS, explain_interrupt, interrupt_on_sigterm
from pipeline.config import Config, ConfigError, schema_for, validate
from pipeline.hashing import MANIFEST
from pipeline.main import RichDisplay, replace_dir, write_json_atomic, open_store
from pipeline.quality import QUALITY_EXIT, QualityFailed, findings_of
from pipeline.runner import Runner, RunSummary, StageResult, flat_metrics
from pipeline.stages import STAGE_NAMES, STAGES, Stage, stage_named
from pipeline.store import Artifact, RunLease, StoreError, changed_files, read_manifest
from pipeline.tracking import pipeline_run, ui_hint

DVC_DIR = Path("dvc_artifacts")
METRICS_DIR = Path("metrics")
PLOTS_DIR = Path("plots")
PICTURES_DIR = Path("pictures")
PARAMS_FILE = Path("params.yaml")
SUMMARY_FILE = Path("metrics.json")
# DVC's metrics, short names that a table of them fits 120 columns: the run's metric each reads (absent where the
# configuration gives none: accel_cycles without an accelerator)
SUMMARY_METRICS = {"top1": "annotate.top1", "sqnr_db_min": "annotate.sqnr_db_min", "bitexact": "codegen.bitexact",
                   "clipped_fraction_max": "calibrate.clipped_fraction_max", "constant_bytes": "codegen.constant_bytes",
                   "arena_bytes": "codegen.arena_bytes", "accel_cycles": "codegen.accel_cycles"}


def out_dir(stage: str) -> Path:
    return DVC_DIR / stage


def metrics_file(stage: str) -> Path:
    return METRICS_DIR / f"{stage}.json"


def plots_dir(stage: str) -> Path:
    return PLOTS_DIR / stage


def pictures_dir(stage: str) -> Path:
    return PICTURES_DIR / stage


def status_file(stage: str) -> Path:
    return DVC_DIR / "status" / f"{stage}.json"


def user_repository() -> Path | None:
    """The repository the user works in when DVC runs this stage in a copy of it (a temporary or queued
    experiment), else None."""
    root = os.environ.get("DVC_ROOT")
    if not root or Path(root).resolve() == Path.cwd().resolve():
        return None
    return Path(root).resolve()


def rebased_on(cfg: Config, root: Path) -> Config:
    """cfg with the paths whose results must outlive an experiment's copy made absolute under `root`."""
    def under_root(path: str) -> str:
        return path if "://" in path or Path(path).expanduser().is_absolute() else str(root / path)

    cfg.store.url = under_root(cfg.store.url)
    cfg.store.cache_dir = under_root(cfg.store.cache_dir)
    if cfg.tracking_uri.startswith("sqlite:///") and not Path(cfg.tracking_uri[len("sqlite:///"):]).is_absolute():
        cfg.tracking_uri = "sqlite:///" + under_root(cfg.tracking_uri[len("sqlite:///"):])
    elif "://" not in cfg.tracking_uri:  # a bare directory: MLflow's file store
        cfg.tracking_uri = under_root(cfg.tracking_uri)
    for ref in (cfg.model.file, cfg.model.test_image):
        if ref.path and not Path(ref.path).exists() and (root / ref.path).exists():
            ref.path = str(root / ref.path)
    if cfg.data.path and not Path(cfg.data.path).exists() and (root / cfg.data.path).exists():
        cfg.data.path = str(root / cfg.data.path)
    return cfg


def load_params(path: Path = PARAMS_FILE) -> Config:
    """params.yaml as the typed config; a ConfigError naming the file when it is not YAML or not the schema's."""
    try:
        loaded = OmegaConf.load(path)
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"{path}: not readable as YAML ({error}); regenerate it from conf/ with `make params`") from None
    if not isinstance(loaded, DictConfig):
        raise ConfigError(f"{path}: holds a {type(loaded).__name__}, not a mapping of config keys; regenerate it with `make params`")
    try:
        schema = schema_for(loaded)
    except ConfigError as error:  # a scheme no option of target/scheme names
        raise ConfigError(f"{path}: {error}; fix it, or regenerate it from conf/ with `make params`") from None
    try:
        cfg = validate(OmegaConf.merge(schema, loaded))
    except OmegaConfBaseException as error:  # an unknown key, a value of the wrong type
        key = getattr(error, "full_key", None) or ""
        raise ConfigError(f"{path}: {key + ': ' if key else ''}{str(error).splitlines()[0]}; fix it, or regenerate it from "
                          "conf/ with `make params`") from None
    root = user_repository()
    return cfg if root is None else rebased_on(cfg, root)


def artifact_in(directory: Path) -> Artifact:
    """An upstream stage's DVC output, verified by content: a later stage's key is the digest its
    manifest records, so files that differ from that manifest would be stored under a key they
    do not have."""
    manifest = read_manifest(directory / MANIFEST)
    if manifest is None:
        raise StoreError(f"{directory}/{MANIFEST} is missing or unreadable; run `dvc repro` to rebuild {directory.name}")
    changed = changed_files(directory, manifest)
    if changed:
        raise StoreError(f"{directory}: {', '.join(changed)} differ from its manifest (edited by hand?); "
                         f"nothing was computed. Run `dvc repro --force {directory.name}` to rebuild it, "
                         f"or `dvc checkout {directory}` to restore it")
    return Artifact(manifest["stage"], manifest["key"], directory, manifest)


def run_one(name: str, console: Console) -> StageResult:
    cfg = load_params()
    stage = stage_named(name)
    inputs = {upstream: artifact_in(out_dir(upstream)) for upstream in stage.inputs}
    store = open_store(cfg)
    lease = RunLease(store, origin="dvc repro")  # until the entry is copied out; the track stage records the whole run
    try:
        with RichDisplay(console) as display:
            result = Runner(cfg, store, display, lease).run_stage(stage, inputs)
        # a copy, not hard links to the store's files: an edit of dvc_artifacts/ in place (an editor, a script) must not
        # reach the stored entry (mode bits do not stop root); DVC links this copy into its own cache
        replace_dir(result.artifact.directory, out_dir(name))
    finally:
        lease.close({})
    write_outputs(stage, result, bool(cfg.pictures))
    findings = findings_of(cfg, name, result.metrics, result.artifact.directory)
    if findings and cfg.quality.enforce:  # the outputs stand (a true measurement); the run stops as run.py's does
        raise QualityFailed(findings)
    for finding in findings:
        console.print(f"[bold yellow]quality (not enforced):[/bold yellow] {escape(str(finding))}", highlight=False)
    return result


def write_outputs(stage: Stage, result: StageResult, pictures: bool) -> None:
    """The git-tracked metrics and plots of a stage, its pictures, and whether the store served it."""
    for path in (metrics_file(stage.name), status_file(stage.name)):
        path.parent.mkdir(parents=True, exist_ok=True)
    # nested under the stage's name: DVC shows `annotate.top1`, the name MLflow and run.py use
    write_json_atomic(metrics_file(stage.name), {stage.name: stage.headline_of(result.metrics)})
    for series in stage.series:
        plots_dir(stage.name).mkdir(parents=True, exist_ok=True)
        written = result.artifact.directory / SERIES_DIR / f"{series.name}.json"
        write_json_atomic(plots_dir(stage.name) / f"{series.name}.json", read_series(written) if written.exists() else [])
    if stage.pictures:
        with tempfile.TemporaryDirectory() as staging:
            for name in stage.pictures:
                if (result.artifact.directory / f"{name}.png").exists():
                    shutil.copyfile(result.artifact.directory / f"{name}.png", Path(staging) / f"{name}.png")
                else:
                    absent_card(Path(staging) / f"{name}.png", f"{stage.name}: {name}", absent_reason(stage, name, pictures))
            replace_dir(Path(staging), pictures_dir(stage.name))
    write_json_atomic(status_file(stage.name), {"key": result.key, "reused": result.reused})


def absent_reason(stage: Stage, picture: str, pictures: bool) -> str:
    """Why this configuration did not draw a stage's picture: pictures=false, else its series' reason where it draws one."""
    if not pictures:
        return "pictures=false: this configuration draws no pictures (its series and metrics are the same)"
    return next((f"not in this configuration: {series.absent_because}" for series in stage.series
                 if series.name == picture and series.absent_because), "not drawn by this target and these settings")


def track(console: Console) -> None:
    cfg = load_params()
    results = []
    for stage in STAGES:
        artifact = artifact_in(out_dir(stage.name))
        status = json.loads(status_file(stage.name).read_text()) if status_file(stage.name).exists() else {}
        reused = bool(status.get("reused"))
        results.append(StageResult(stage, artifact, reused, wall_s=0.0))
    open_store(cfg).record_run({result.stage.name: result.key for result in results}, origin="dvc repro")
    summary = RunSummary(results, metrics=flat_metrics(results))
    with pipeline_run(cfg) as tracker:
        for result in results:
            tracker.log_stage(result)
        tracker.log_summary(summary)
        # as run.py: the limits the figures broke (quality.enforce=false let the stages go on) tag the run, and a model
        # past them is not logged as one to ship
        summary.quality = [finding for result in results
                           for finding in findings_of(cfg, result.stage.name, result.metrics, result.artifact.directory)]
        if summary.quality:
            tracker.mark_quality(summary.quality)
        else:
            summary.logged_model_id = tracker.log_model(summary, cfg)
    summary.mlflow_run_id, summary.mlflow_experiment_id = tracker.run_id, tracker.experiment_id
    write_json_atomic(SUMMARY_FILE, {name: summary.metrics[metric] for name, metric in SUMMARY_METRICS.items()
                                     if metric in summary.metrics})
    write_json_atomic(DVC_DIR / "run.json", {
        "mlflow_run_id": summary.mlflow_run_id,
        "stages": {r.stage.name: {"key": r.key, "reused": r.reused} for r in results},
    })
    console.print(escape(f"MLflow run {summary.mlflow_run_id} in {cfg.tracking_uri}: {ui_hint(cfg.tracking_uri, tracker.experiment_id)}"))
    if summary.logged_model_id:
        console.print(escape(f"logged model models:/{summary.logged_model_id}"))


def main(argv: list[str]) -> int:
    console = Console(stderr=True, soft_wrap=True)
    if len(argv) != 1:
        console.print("usage: python -m pipeline.dvc_stage <stage>|--track")
        return 2
    interrupt_on_sigterm()
    if argv[0] != "--track" and argv[0] not in STAGE_NAMES:
        console.print(f"[bold red]error:[/bold red] {escape(argv[0])!s} is not a stage; choose one of {', '.join(STAGE_NAMES)} "
                      "or --track", highlight=False)
        return 2
    try:
        track(console) if argv[0] == "--track" else run_one(argv[0], console)
    except KeyboardInterrupt as interrupt:
        explain_interrupt(interrupt, console)
        return INTERRUPTED_EXIT
    except QualityFailed as failed:
        console.print(f"[bold red]stopped:[/bold red] {escape(str(failed))}", highlight=False)
        return QUALITY_EXIT
    except USER_ERRORS as error:
        console.print(f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
