"""The whole loop to an int8 `.tflite`, ours against TFLite's converter, on MLPerf Tiny's float ResNet-8.

    .venv/bin/python bench/bench_loop.py [--repeats 1]

Side by side in one command, each a fresh process (Python and TensorFlow start-up included) on a fresh store and MLflow
database under a temporary directory:
  converter   the float .h5 loaded by Keras, TFLiteConverter with the first 256 CIFAR-10 training images (calib.num_images'
              default) as its representative data, int8 in and out, model.tflite written
  ours, to the .tflite   python run.py model=keras_cifar10 ... target=tflite_int8 until=emit_ir
  the same, MLflow's database already there   as a project's second model finds it (MLflow builds a new database's
              tables once, about 1.4 s: made beforehand, untimed); the store still fresh
  ours, a default run    the same through codegen: the accuracy, SQNR, reference-kernel and C checks included
and prints each one's wall time and its ratio to the converter's (budget 2x for the run to model.tflite), then where
our time goes, per stage (run.py's stage table)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
SHARED = PROJECT.parent / "shared"
RESNET8 = SHARED / "models" / "mlperf_tiny_resnet8" / "pretrainedResnet.h5"
CIFAR10 = SHARED / "data" / "cifar-10-batches-py"
CALIBRATION_IMAGES = 256
BUDGET = 2.0
RUN = ["model=keras_cifar10", f"model.file.path={RESNET8}", f"data.path={CIFAR10}", "model.preprocess.scale=1",
       "model.preprocess.offset=0", "target=tflite_int8"]

CONVERTER = f"""
import sys
sys.path.insert(0, {str(PROJECT)!r})
import numpy as np, tensorflow as tf, keras
from core.data.datasets import load_split  # the CIFAR-10 batches read without unpickling, raw pixels as the model takes
model = keras.models.load_model({str(RESNET8)!r}, compile=False)
images = np.asarray(load_split("cifar10", {str(CIFAR10)!r}, "data_batch_1", {{"scale": 1, "offset": 0}}, limit={CALIBRATION_IMAGES}).images)
converter = tf.lite.TFLiteConverter.from_keras_model(model)
converter.optimizations = [tf.lite.Optimize.DEFAULT]
converter.representative_dataset = lambda: ([image[None]] for image in images)
converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
converter.inference_input_type = converter.inference_output_type = tf.int8
open("model.tflite", "wb").write(converter.convert())
"""


def timed(command: list[str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}... failed:\n{completed.stderr[-3000:]}")
    return seconds, completed.stderr


MAKE_DATABASE = """
import sys
from mlflow.tracking import MlflowClient
MlflowClient(tracking_uri=sys.argv[1]).search_experiments()
"""


def ours(work: Path, *extra: str, existing_database: bool = False) -> tuple[float, dict]:
    """A run.py run on a fresh store: its wall time, and each stage's seconds from its metrics.json."""
    work.mkdir(parents=True)
    if existing_database:
        timed([sys.executable, "-c", MAKE_DATABASE, f"sqlite:///{work / 'mlflow.db'}"], PROJECT)
    seconds, _ = timed([sys.executable, str(PROJECT / "run.py"), *RUN, *extra, f"store.url={work / 'store'}",
                        f"store.cache_dir={work / 'cache'}", f"tracking_uri=sqlite:///{work / 'mlflow.db'}",
                        f"hydra.run.dir={work / 'run'}"], PROJECT)
    metrics = json.loads((work / "run" / "metrics.json").read_text())
    return seconds, {key.split(".")[0]: round(value, 1) for key, value in metrics.items() if key.endswith(".wall_s")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="each measured this many times, side by side; the best kept")
    args = parser.parse_args()
    if not RESNET8.exists():
        raise SystemExit(f"{RESNET8} is missing: the shared models are not beside the checkout")
    best: dict[str, float] = {}
    stages: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        for repeat in range(args.repeats):
            converter_dir = root / f"converter{repeat}"
            converter_dir.mkdir()
            runs = {"converter": lambda converter_dir=converter_dir: (timed([sys.executable, "-c", CONVERTER], converter_dir)[0], {}),
                    "ours, to model.tflite": lambda repeat=repeat: ours(root / f"tflite{repeat}", "until=emit_ir"),
                    "the same, MLflow's database there": lambda repeat=repeat: ours(root / f"tflite_db{repeat}", "until=emit_ir",
                                                                                    existing_database=True),
                    "ours, a default run": lambda repeat=repeat: ours(root / f"full{repeat}")}
            for name, run in runs.items():
                seconds, per_stage = run()
                if seconds < best.get(name, float("inf")):
                    best[name], stages[name] = seconds, per_stage
    baseline = best["converter"]
    print(f"MLPerf Tiny's float ResNet-8 to an int8 .tflite, {CALIBRATION_IMAGES} calibration images, best of {args.repeats}:")
    for name, seconds in best.items():
        print(f"  {name:<34} {seconds:6.1f} s   {seconds / baseline:4.2f}x the converter")
        if stages[name]:
            print("    " + ", ".join(f"{stage} {value} s" for stage, value in stages[name].items()))
    for name in ("ours, to model.tflite", "the same, MLflow's database there"):
        ratio = best[name] / baseline
        print(f"{name} / converter: {ratio:.2f}x (budget {BUDGET}x): {'within' if ratio <= BUDGET else 'OVER'}")


if __name__ == "__main__":
    main()
