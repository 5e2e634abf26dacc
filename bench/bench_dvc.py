"""`dvc exp run` against `run.py` on the same configuration, every stage's result already in the store.

    .venv/bin/python bench/bench_dvc.py [--repeats 2]

In a fresh clone of the working tree (its tracked files, under a temporary directory; the default model, the digits):
`dvc repro` (the baseline, mse), then `python run.py calib.method=kl` twice (the second a store hit at every stage),
then `dvc exp run --temp -S calib.method=kl` (each stage a store hit) and `dvc exp run --temp` with nothing changed
(DVC's own floor: only the track stage runs), side by side, each the best of --repeats. Prints each wall time, the
ratio of the experiment to run.py (budget 2x) and one stage process's time (`python -m pipeline.dvc_stage calibrate`,
a store hit) and the track stage's."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
BUDGET = 2.0


def run(command: str, cwd: Path) -> float:
    """A shell line in the clone, the venv first on PATH; its wall time."""
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    started = time.perf_counter()
    completed = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, env=environment)
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"{command} failed:\n{completed.stdout[-2000:]}{completed.stderr[-2000:]}")
    return seconds


def clone(into: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (PROJECT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT / name, into / name)
    for line in ("git init -q", "git config user.email bench@example.com", "git config user.name bench", "git add -A",
                 "git commit -qm snapshot"):
        run(line, into)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        work = clone(Path(temporary) / "project")
        run("dvc repro -q && git add -A && git commit -qm baseline", work)
        run("python run.py calib.method=kl", work)  # fills the store with kl's stages
        best: dict[str, float] = {}
        for repeat in range(args.repeats):
            for name, command in (("run.py calib.method=kl", "python run.py calib.method=kl"),
                                  ("dvc exp run --temp -S calib.method=kl", f"dvc exp run -q --temp -n kl{repeat} -S calib.method=kl"),
                                  ("dvc exp run --temp, nothing changed", f"dvc exp run -q --temp -n same{repeat}"),
                                  ("one stage process (calibrate)", "python -m pipeline.dvc_stage calibrate"),
                                  ("the track stage", "python -m pipeline.dvc_stage --track")):
                best[name] = min(best.get(name, float("inf")), run(command, work))
    baseline = best["run.py calib.method=kl"]
    print(f"every stage a store hit, best of {args.repeats}:")
    for name, seconds in best.items():
        print(f"  {name:<40} {seconds:6.1f} s   {seconds / baseline:5.2f}x run.py")
    ratio = best["dvc exp run --temp -S calib.method=kl"] / baseline
    print(f"dvc exp run / run.py: {ratio:.2f}x (budget {BUDGET}x): {'within' if ratio <= BUDGET else 'OVER'}")


if __name__ == "__main__":
    main()
