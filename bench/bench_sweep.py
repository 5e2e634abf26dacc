"""A Hydra sweep of the five calibration methods vs one run of the pipeline, same model, as a user runs them.

    .venv/bin/python bench/bench_sweep.py [--model mbv1_cifar10] [--methods qat,minmax,kl,percentile,mse]

Runs, side by side in one command, each on a fresh store and MLflow database under a temporary directory
(mbv1_cifar10's graph, test image and CIFAR-10 from ../shared, through model.file.path, model.test_image.path
and data.path):
  one run     python run.py model=M calib.method=kl             (before the sweep and again after it)
  the sweep   python run.py -m model=M calib.method=qat,minmax,kl,percentile,mse
and prints the wall time of each (the whole process: Python and TensorFlow start-up included), their
ratio (budget 1.5x), and where the time goes: per stage, the seconds of the one run and of the sweep
(all jobs), with how many of the sweep's jobs reused the stage from the store. Checks in the same run
that every job succeeded, that its codegen is bit-exact with the simulator, that the stages before
calibrate were computed once for the whole sweep, and that the stored parts no method reaches
(calibrate's observation, the QAT graph's own top-1) were computed once per flavour.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from pipeline.stages import STAGE_NAMES  # noqa: E402  (the project, from its root)

BUDGET = 1.5
SHARED_DIR = PROJECT.parent / "shared"
LOCAL_FILES = {"mbv1_cifar10": [f"model.file.path={SHARED_DIR / 'models/mobilenet_v1_0.5_128_cifar10/graph.pb'}",
                                f"model.test_image.path={SHARED_DIR / 'models/mobilenet_v1_0.5_128_cifar10/ship.png'}",
                                f"data.path={SHARED_DIR / 'data/cifar-10-batches-py'}"]}
SHARED = ("import", "fold_check")  # the stages no calibration choice reaches
# the stored parts of later stages no method reaches, and how many of them a sweep of methods computes: the
# observation once for qat (the trained graph as is) and once for every other method (equalized)
STORED_PARTS = {"calibrate.observation": 2, "annotate.qat_graph_top1": 1}


def run(arguments: list[str], work: Path, label: str) -> tuple[float, list[dict]]:
    """(wall seconds, each job's metrics.json) of `python run.py arguments` with its own store and MLflow."""
    command = [sys.executable, "run.py", *arguments, f"store.url={work / 'store'}", f"tracking_uri=sqlite:///{work / 'mlflow.db'}",
               f"hydra.run.dir={work / 'run'}", f"hydra.sweep.dir={work / 'sweep'}"]
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"{label} failed (exit {completed.returncode}):\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}")
    jobs = sorted(work.glob("run/metrics.json")) or sorted(work.glob("sweep/*/metrics.json"), key=lambda path: int(path.parent.name))
    return wall, [json.loads(path.read_text()) for path in jobs]


def check(jobs: list[dict], expected: int, label: str) -> None:
    if len(jobs) != expected:
        raise SystemExit(f"{label}: {len(jobs)} jobs wrote metrics.json, expected {expected}")
    for number, metrics in enumerate(jobs):
        if metrics.get("codegen.bitexact") != 1.0:
            raise SystemExit(f"{label}, job {number}: codegen.bitexact {metrics.get('codegen.bitexact')}, not 1.0")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mbv1_cifar10")
    parser.add_argument("--methods", default="qat,minmax,kl,percentile,mse")
    args = parser.parse_args()
    methods = args.methods.split(",")
    model = [f"model={args.model}", *LOCAL_FILES.get(args.model, [])]
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as work:
        work = Path(work)
        one_s, (one,) = run([*model, "calib.method=kl"], work / "one", "one run")
        check([one], 1, "one run")
        sweep_s, jobs = run(["-m", *model, f"calib.method={args.methods}"], work / "sweep", "the sweep")
        check(jobs, len(methods), "the sweep")
        parts = {part: len(list((work / "sweep" / "store" / part).glob("*/manifest.json"))) for part in STORED_PARTS}
        # the one run again, after the sweep: the first pays for cold files (the model, TensorFlow's libraries); the
        # faster of the two is the baseline, so the ratio errs on the high side
        again_s, (again,) = run([*model, "calib.method=kl"], work / "again", "one run, after the sweep")
        check([again], 1, "one run, after the sweep")
        first_s, one_s = one_s, min(one_s, again_s)
    computed = {stage: sum(1 for job in jobs if job[f"{stage}.wall_s"] > 0.5 * job[f"{stage}.compute_s"]) for stage in STAGE_NAMES}
    for stage in SHARED:
        if computed[stage] != 1:
            print(f"{stage} was computed by {computed[stage]} of the sweep's jobs, not once: the store did not share it")
            return 1
    for part, expected in STORED_PARTS.items():
        if "qat" in methods and parts[part] != expected:
            print(f"the sweep computed {parts[part]} {part} parts, expected {expected}: the store did not share them")
            return 1
    print(f"model {args.model}; every job bit-exact in codegen; {', '.join(SHARED)} computed once for the sweep; "
          + ", ".join(f"{part} computed {count}x" for part, count in parts.items()))
    print(f"{'stage':12} {'one run s':>10} {'sweep s':>9}  computed by")
    for stage in STAGE_NAMES:
        sweep_stage = sum(job[f"{stage}.wall_s"] for job in jobs)
        print(f"{stage:12} {one[f'{stage}.wall_s']:10.1f} {sweep_stage:9.1f}  {computed[stage]} of {len(jobs)} jobs")
    print(f"one run (calib.method=kl): {one_s:.1f} s (the faster of {first_s:.1f} s before the sweep and {again_s:.1f} s after); "
          f"sweep of {len(methods)} methods ({args.methods}): {sweep_s:.1f} s")
    print(f"ratio sweep / one run {sweep_s / one_s:.2f} (budget {BUDGET})")
    return 0 if sweep_s / one_s <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
