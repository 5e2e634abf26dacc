"""Run the pipeline: `python run.py [key=value ...]`, `python run.py -m calib.method=minmax,kl`.

Hydra composes conf/ into the typed config of pipeline/config.py; a bad key or
value stops here, before any stage runs.
"""

from __future__ import annotations

import hashlib
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig
from rich.console import Console

from pipeline.cli import interrupt_on_sigterm, report_run, run_or_explain
from pipeline.config import register

register()


def _sweep_id() -> str | None:
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    return hashlib.sha256(str(hydra_cfg.sweep.dir).encode()).hexdigest()[:12]


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    console = Console(stderr=True, soft_wrap=True)
    interrupt_on_sigterm()
    sweep_id = _sweep_id()
    summary = run_or_explain(cfg, console, sweep_id=sweep_id)
    if summary is None:
        if sweep_id is None:
            sys.exit(2)
        # in a sweep a configuration the target cannot take is a result (its MLflow run is
        # marked FAILED with the stages that did run); the other jobs still run
        console.print(f"[yellow]this sweep job failed; the sweep goes on (sweep {sweep_id})[/yellow]")
        return
    report_run(summary, cfg, console)


if __name__ == "__main__":
    main()
