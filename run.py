"""Run the pipeline: `python run.py [key=value ...]`, `python run.py -m calib.method=minmax,kl`.

Hydra composes conf/ into the typed config of pipeline/config.py; a bad key or
value stops here, before any stage runs.
"""

from __future__ import annotations

import os
import sys

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from rich.console import Console

from pipeline.cli import interrupt_on_sigterm, report_run, run_or_explain, unwritable_output_dir
from pipeline.completion import answer_query
from pipeline.config import command_line_overrides, register, unknown_key
from pipeline.sweep import current_sweep, missing_launcher

register()
# submitit's logger would print each warning of a Slurm sweep three times (its stdout and stderr handlers, then Hydra's
# root logger): only Hydra's
os.environ.setdefault("SUBMITIT_LOG_LEVEL", "NOCONFIG")


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    console = Console(stderr=True, soft_wrap=True)
    interrupt_on_sigterm()
    sweep = current_sweep()
    summary = run_or_explain(cfg, console, sweep=sweep)
    if summary is None:
        if sweep is None:
            sys.exit(2)
        # in a sweep a configuration the target cannot take is a result (its MLflow run is
        # marked FAILED with the stages that did run); the other jobs still run
        console.print(f"[yellow]this sweep job failed; the sweep goes on (sweep {sweep.id}; the table at the end lists every job)[/yellow]")
        return
    report_run(summary, cfg, console, output_dir=Path(HydraConfig.get().runtime.output_dir), sweep=sweep)


if __name__ == "__main__":
    refused = missing_launcher(sys.argv) or unknown_key(command_line_overrides(sys.argv[1:])) or unwritable_output_dir(sys.argv[1:])
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        sys.exit(2)
    if not answer_query(sys.argv):  # a typed value's choices for the shell; all else is Hydra's
        main()
