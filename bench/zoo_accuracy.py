"""What quantization costs on the models users bring: the zoo of tests/test_user_models.py,
briefly trained on CIFAR-10, saved in each format, through all eight stages on each target.

    .venv/bin/python bench/zoo_accuracy.py [--epochs 3] [--train-images 20000] [--eval-images 1000]
                                          [--models lenet,resnet] [--formats keras] [--targets tf2ir,accel]

Prints (and writes to --out, default bench/out/zoo_accuracy.md) a table model x format x target:
top-1 of the float graph, of the annotated graph and of the integer simulation on the first
--eval-images CIFAR-10 test images, the simulation's SQNR against float at the end point, and
codegen.bitexact. Training is a short, seeded Adam run, not a model anyone should ship: on the 932
training images ../shared holds, the small networks learn and the keras.applications MobileNets
overfit and stay near chance; what the table shows is what each stage keeps of the float model.
Needs ../shared/data/cifar-10-batches-py.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import keras  # noqa: E402
import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402

from conftest import CIFAR10_DIR, compose  # noqa: E402
from core.data.datasets import load_cifar10  # noqa: E402
from pipeline.main import run_pipeline  # noqa: E402
from tables import publish  # noqa: E402  (bench/tables.py)
from test_user_models import FORMATS, ZOO, save_as  # noqa: E402  (the architectures the tests run)

COLUMNS = ("model", "format", "target", "top-1 float", "top-1 annotate", "top-1 simulate", "SQNR simulate (dB)", "bitexact", "layers (accel)")


def training_images(count: int) -> tuple[np.ndarray, np.ndarray]:
    """The first `count` training images of the batches present (../shared holds 932 images of data_batch_1)."""
    batches = [load_cifar10(CIFAR10_DIR, f"data_batch_{k}") for k in range(1, 6) if (CIFAR10_DIR / f"data_batch_{k}").is_file()]
    images = np.concatenate([images for images, _ in batches])[:count]
    labels = np.concatenate([labels for _, labels in batches])[:count]
    return images.astype(np.float32) / 127.5 - 1.0, labels  # conf/model/keras_cifar10.yaml's preprocessing


def train(name: str, images: np.ndarray, labels: np.ndarray, epochs: int) -> keras.Model:
    keras.utils.set_random_seed(0)
    model = ZOO[name]()
    model.compile(optimizer=keras.optimizers.Adam(2e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(images, labels, batch_size=128, epochs=epochs, verbose=2)
    return model


def run(path: Path, fmt: str, target: str, work: Path, eval_images: int) -> dict[str, float]:
    cfg = compose(f"store.url={work / 'store'}", f"store.cache_dir={work / 'cache'}", f"tracking_uri=sqlite:///{work / 'mlflow.db'}",
                  "model=keras_cifar10", f"model.name={path.parent.name}", f"model.format={fmt}", f"model.file.path={path}",
                  f"data.path={CIFAR10_DIR}", f"target={target}", f"data.eval_num_images={eval_images}")
    return run_pipeline(cfg, console=Console(stderr=True)).metrics


def row(name: str, fmt: str, target: str, metrics: dict[str, float]) -> list[str]:
    accel = metrics.get("partition.layers_accel", 0.0)
    return [name, fmt, target, f"{metrics['annotate.top1_float']:.3f}", f"{metrics['annotate.top1']:.3f}", f"{metrics['simulate.top1']:.3f}",
            f"{metrics['simulate.sqnr_db_min']:.1f}", f"{metrics['codegen.bitexact']:.0f}",
            f"{metrics['emit_ir.layers']:.0f} ({accel:.0f})"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train-images", type=int, default=20000)
    parser.add_argument("--eval-images", type=int, default=1000)
    parser.add_argument("--models", default=",".join(ZOO))
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--targets", default="tf2ir,accel")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "zoo_accuracy.md")
    args = parser.parse_args()
    if not CIFAR10_DIR.is_dir():
        sys.exit(f"needs CIFAR-10 at {CIFAR10_DIR} (../shared/data/cifar-10-batches-py)")
    images, labels = training_images(args.train_images)
    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo_accuracy_") as scratch:
        work = Path(scratch)
        for name in args.models.split(","):
            started = time.perf_counter()
            model = train(name, images, labels, args.epochs)
            print(f"{name}: trained in {time.perf_counter() - started:.0f} s", file=sys.stderr)
            (work / name).mkdir()
            for fmt in args.formats.split(","):
                path = save_as(model, fmt, work / name)
                for target in args.targets.split(","):
                    rows.append(row(name, fmt, target, run(path, fmt, target, work, args.eval_images)))
                    print(" | ".join(rows[-1]), file=sys.stderr)
    publish(COLUMNS, rows, args.out)


if __name__ == "__main__":
    main()
