"""Our post-training quantization on the power-of-two, per-tensor `tf2ir` target against TensorFlow
Lite's full-int8 PTQ (per-channel weights, affine activations), on the same model and the same images.

    .venv/bin/python bench/ptq_vs_tflite.py [--epochs 30] [--size 64] [--calib-images 256]
                                           [--configs minmax,minmax+eq+bc,kl+eq+bc,...]

Builds keras.applications.MobileNet (alpha 0.25, --size px, seeded, weights=None), trains it briefly
on the CIFAR-10 training images ../shared holds, saves it as .keras and then, side by side:
- each of our configurations through run.py's path (all eight stages; the figures are simulate's:
  the integer network the IR describes, which codegen reproduces bit for bit),
- TFLite's converter with the first --calib-images calibration images as its representative data
  set, int8 input and output, run by TFLite's interpreter.
Both are measured on the CIFAR-10 test images against the float Keras model: top-1, agreement of
the predicted class with float's, and the end point's SQNR (sum of squares over every image, as
simulate.sqnr_db_min). Prints the table and writes it to --out (default bench/out/ptq_vs_tflite.md).
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
import tensorflow as tf  # noqa: E402
from rich.console import Console  # noqa: E402

from conftest import CIFAR10_DIR, compose  # noqa: E402
from core.data.datasets import load_split  # noqa: E402
from core.quantize.evaluation import sqnr_db  # noqa: E402
from pipeline.main import run_pipeline  # noqa: E402
from tables import publish  # noqa: E402  (bench/tables.py)
from pipeline.params import to_plain  # noqa: E402

# name -> run.py overrides. "+eq+bc": calib.equalize and calib.bias_correction; "+wmse":
# calib.weight_method=mse; the defaults are all three
CONFIGURATIONS = {
    "minmax": ["calib.method=minmax", "calib.equalize=false", "calib.bias_correction=false", "calib.weight_method=minmax"],
    "minmax+eq+bc": ["calib.method=minmax", "calib.weight_method=minmax"],
    "minmax+eq+bc+wmse": ["calib.method=minmax"],
    "percentile+eq+bc+wmse": ["calib.method=percentile"],
    "mse+eq+bc+wmse": ["calib.method=mse"],
    "kl+eq+bc+wmse": ["calib.method=kl"],
    "auto+eq+bc+wmse": ["calib.method=auto"],
}
COLUMNS = ("quantization", "top-1", "agreement with float", "end-point SQNR (dB)", "seconds")


def model_overrides(work: Path, model_path: Path, size: int, calib_images: int) -> list[str]:
    return [f"store.url={work / 'store'}", f"store.cache_dir={work / 'cache'}", f"tracking_uri=sqlite:///{work / 'mlflow.db'}",
            "model=keras_cifar10", "model.name=mobilenet_a025", f"model.file.path={model_path}",
            f"model.preprocess.size=[{size},{size}]", f"data.path={CIFAR10_DIR}", f"calib.num_images={calib_images}"]


def dataset(cfg, split: str, limit: int | None):
    """The images the pipeline itself would feed (the model's preprocessing, config `data`)."""
    labeled = load_split(cfg.data.kind.value, cfg.data.path, split, to_plain(cfg.model.preprocess), limit=limit)
    return np.asarray(labeled.images), labeled.labels


def train(images: np.ndarray, labels: np.ndarray, size: int, epochs: int) -> keras.Model:
    """A short, seeded Adam run with flips and shifts. The batch-norm momentum is 0.9, not Keras's
    0.99: in a few hundred steps the moving statistics would otherwise stay near their initial
    values and the trained model would predict one class at inference."""
    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNet(input_shape=(size, size, 3), alpha=0.25, weights=None, classes=10)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = 0.9
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    augment = keras.Sequential([keras.layers.RandomFlip("horizontal"), keras.layers.RandomTranslation(0.1, 0.1)])
    batches = (tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(len(images), seed=0).batch(64)
               .map(lambda batch, batch_labels: (augment(batch, training=True), batch_labels)))
    model.fit(batches, epochs=epochs, verbose=2)
    return model


def tflite_int8(model: keras.Model, calibration: np.ndarray) -> bytes:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([image[None]] for image in calibration)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    return converter.convert()


def run_tflite(flatbuffer: bytes, images: np.ndarray) -> np.ndarray:
    interpreter = tf.lite.Interpreter(model_content=flatbuffer, num_threads=1)
    interpreter.allocate_tensors()
    source, sink = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    in_scale, in_zero = source["quantization"]
    out_scale, out_zero = sink["quantization"]
    outputs = []
    for image in images:
        quantized = np.clip(np.round(image / in_scale) + in_zero, -128, 127).astype(np.int8)
        interpreter.set_tensor(source["index"], quantized[None])
        interpreter.invoke()
        outputs.append((interpreter.get_tensor(sink["index"]).astype(np.float32) - out_zero) * out_scale)
    return np.concatenate(outputs)


def tflite_row(model: keras.Model, calibration: np.ndarray, images: np.ndarray, labels: np.ndarray, reference: np.ndarray) -> list[str]:
    started = time.perf_counter()
    outputs = run_tflite(tflite_int8(model, calibration), images)
    predicted, float_predicted = outputs.argmax(axis=1), reference.argmax(axis=1)
    return ["TFLite full-int8 PTQ", f"{np.mean(predicted == labels):.4f}", f"{np.mean(predicted == float_predicted):.4f}",
            f"{sqnr_db(reference, outputs):.2f}", f"{time.perf_counter() - started:.0f}"]


def ours_row(name: str, overrides: list[str]) -> list[str]:
    started = time.perf_counter()
    metrics = run_pipeline(compose(*overrides), console=Console(stderr=True)).metrics
    if metrics["simulate.end_point_agreement"] != 1.0 or metrics["codegen.bitexact"] != 1.0:
        raise SystemExit(f"{name}: simulate disagrees with annotate or codegen is not bit-exact: {metrics}")
    # annotate's end points equal simulate's bit for bit (checked above), so its agreement is simulate's
    return [f"tf2ir {name}", f"{metrics['simulate.top1']:.4f}", f"{metrics['annotate.top1_agreement']:.4f}",
            f"{metrics['simulate.sqnr_db_min']:.2f}", f"{time.perf_counter() - started:.0f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--calib-images", type=int, default=256)
    parser.add_argument("--configs", default=",".join(CONFIGURATIONS), help=f"any of: {', '.join(CONFIGURATIONS)}")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "ptq_vs_tflite.md")
    args = parser.parse_args()
    if not CIFAR10_DIR.is_dir():
        sys.exit(f"needs CIFAR-10 at {CIFAR10_DIR} (../shared/data/cifar-10-batches-py)")
    unknown = set(args.configs.split(",")) - set(CONFIGURATIONS)
    if unknown:
        sys.exit(f"--configs: unknown {sorted(unknown)}; choose from {list(CONFIGURATIONS)}")
    with tempfile.TemporaryDirectory(prefix="ptq_vs_tflite_") as scratch:
        work = Path(scratch)
        model_path = work / "mobilenet_a025.keras"
        base = model_overrides(work, model_path, args.size, args.calib_images)
        cfg = compose(*base)
        train_images, train_labels = dataset(cfg, cfg.data.calib_split, None)
        model = train(train_images, train_labels, args.size, args.epochs)
        model.save(model_path)
        test_images, test_labels = dataset(cfg, cfg.data.eval_split, cfg.data.eval_num_images)
        reference = model.predict(test_images, batch_size=128, verbose=0)
        print(f"float top-1 {np.mean(reference.argmax(axis=1) == test_labels):.4f} on {len(test_labels)} test images", file=sys.stderr)
        rows = [["float (Keras)", f"{np.mean(reference.argmax(axis=1) == test_labels):.4f}", "1.0000", "", ""],
                tflite_row(model, train_images[:args.calib_images], test_images, test_labels, reference)]
        print(" | ".join(rows[-1]), file=sys.stderr)
        for name in args.configs.split(","):
            rows.append(ours_row(name, base + CONFIGURATIONS[name]))
            print(" | ".join(rows[-1]), file=sys.stderr)
    publish(COLUMNS, rows, args.out)


if __name__ == "__main__":
    main()
