"""dvc.yaml's entry point: `python -m pipeline.dvc_stage <stage>` runs one declared
stage through the same Runner and store as run.py, reading the composed config
from params.yaml and its inputs from the upstream stages' DVC outputs;
`python -m pipeline.dvc_stage --track` records the whole run in MLflow."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from omegaconf import OmegaConf
from rich.console import Console
from rich.markup import escape

from pipeline.cli import INTERRUPTED_EXIT, USER_ERRORS, explain_interrupt, interrupt_on_sigterm
from pipeline.config import Config, validate
from pipeline.hashing import MANIFEST
from pipeline.main import RichDisplay, replace_dir, write_json_atomic, open_store
from pipeline.runner import Runner, RunSummary, StageResult, flat_metrics
from pipeline.stages import STAGES, stage_named
from pipeline.store import Artifact, StoreError, changed_files, read_manifest
from pipeline.tracking import pipeline_run

DVC_DIR = Path("dvc_artifacts")
PARAMS_FILE = Path("params.yaml")


def out_dir(stage: str) -> Path:
    return DVC_DIR / stage


def metrics_file(stage: str) -> Path:
    return DVC_DIR / "metrics" / f"{stage}.json"


def load_params(path: Path = PARAMS_FILE) -> Config:
    return validate(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.load(path)))


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
    with RichDisplay(console) as display:
        result = Runner(cfg, open_store(cfg), display).run_stage(stage, inputs)
    DVC_DIR.mkdir(exist_ok=True)
    replace_dir(result.artifact.directory, out_dir(name))
    metrics_file(name).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(metrics_file(name), {**result.metrics, "reused": float(result.reused)})
    return result


def track(console: Console) -> None:
    cfg = load_params()
    results = []
    for stage in STAGES:
        artifact = artifact_in(out_dir(stage.name))
        reused = bool(json.loads(metrics_file(stage.name).read_text()).get("reused"))
        results.append(StageResult(stage, artifact, reused, wall_s=0.0))
    with pipeline_run(cfg) as tracker:
        for result in results:
            tracker.log_stage(result)
    summary = RunSummary(results, mlflow_run_id=tracker.run_id, metrics=flat_metrics(results))
    write_json_atomic(DVC_DIR / "run.json", {
        "mlflow_run_id": summary.mlflow_run_id,
        "stages": {r.stage.name: {"key": r.key, "reused": r.reused} for r in results},
    })
    console.print(escape(f"MLflow run {summary.mlflow_run_id} in {cfg.tracking_uri}"))


def main(argv: list[str]) -> int:
    console = Console(stderr=True, soft_wrap=True)
    if len(argv) != 1:
        console.print("usage: python -m pipeline.dvc_stage <stage>|--track")
        return 2
    interrupt_on_sigterm()
    try:
        track(console) if argv[0] == "--track" else run_one(argv[0], console)
    except KeyboardInterrupt as interrupt:
        explain_interrupt(interrupt, console)
        return INTERRUPTED_EXIT
    except USER_ERRORS as error:
        console.print(f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
