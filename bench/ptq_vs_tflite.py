"""Our post-training quantization against TensorFlow Lite's full-int8 PTQ (per-channel weights, affine
activations), on the same model and the same images, on our power-of-two `tf2ir` target and on
`tflite_int8`, TFLite's own scheme.

    .venv/bin/python bench/ptq_vs_tflite.py [--model mobilenet|resnet8] [--targets tf2ir,tflite_int8,tflite_int16x8]
                                           [--epochs 30] [--size 64] [--calib-images 256]
                                           [--configs minmax,minmax+eq+bc,kl+eq+bc,...]

--model mobilenet (default) builds keras.applications.MobileNet (alpha 0.25, --size px, seeded,
weights=None) and trains it briefly on the CIFAR-10 training images ../shared holds; --model resnet8
takes MLPerf Tiny's trained ResNet-8 (../shared/models/mlperf_tiny_resnet8/pretrainedResnet.h5, raw
pixels). Then, side by side:
- each of our configurations on each of --targets through run.py's path: on tf2ir all eight stages
  (the figures are simulate's: the integer network the IR describes, which codegen reproduces bit for
  bit); on tflite_int8 and tflite_int16x8 (TFLite's 16x8 mode: int16 activations, int8 weights) the
  calibrated table written as a .tflite (core/backends/tflite) and run on the scheme's kernels, which give
  every tensor TFLite's reference kernels give (simulate checks it on every run),
- TFLite's converter with the first --calib-images calibration images as its representative data
  set, int8 input and output, run by TFLite's interpreter (its default kernels, one thread); with
  tflite_int16x8 among --targets, its 16x8 mode too (int16 input and output).
Both are measured on the CIFAR-10 test images against the float Keras model: top-1, agreement of
the predicted class with float's, and the end point's SQNR (sum of squares over every image, as
simulate.sqnr_db_min). Prints the table and writes it to --out (default bench/out/ptq_vs_tflite_<model>.md).
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
from ai_edge_litert.interpreter import Interpreter  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from rich.console import Console  # noqa: E402

from conftest import CIFAR10_DIR, MODELS, compose  # noqa: E402
from core.data.datasets import load_split  # noqa: E402
from core.quantize.evaluation import sqnr_db  # noqa: E402
from core.backends.tflite.export import export_tflite  # noqa: E402
from core.frontend.graph import Graph  # noqa: E402
from core.frontend.tflite import ACTIVATION_BITS, read_tflite  # noqa: E402
from core.ir.layers import group_layers  # noqa: E402
from core.ir.tflite_interpreter import run_int8  # noqa: E402
from core.quantize.table import CalibrationTable  # noqa: E402
from core.quantize.tflite_math import affine_quantize, dequantize  # noqa: E402
from pipeline.main import run_pipeline  # noqa: E402
from pipeline.quality import QualityFailed  # noqa: E402
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
RESNET8 = MODELS / "mlperf_tiny_resnet8" / "pretrainedResnet.h5"
# tf2ir runs every stage and reports simulate's figures; the TFLite schemes stop at annotate, their .tflite run here
TARGETS = {"tf2ir": [], "tflite_int8": ["target=tflite_int8", "until=annotate"],
           "tflite_int16x8": ["target=tflite_int16x8", "until=annotate"]}
# TFLite's converter modes: (row name, its ops set, its input and output type), the 16x8 one measured beside tflite_int16x8
CONVERTER_MODES = {"int8": ("TFLite full-int8 PTQ", tf.lite.OpsSet.TFLITE_BUILTINS_INT8, tf.int8),
                   "16x8": ("TFLite 16x8 PTQ", tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8, tf.int16)}


def model_overrides(work: Path, model_path: Path, size: int, calib_images: int, model: str) -> list[str]:
    common = [f"store.url={work / 'store'}", f"store.cache_dir={work / 'cache'}", f"tracking_uri=sqlite:///{work / 'mlflow.db'}",
              "model=keras_cifar10", f"model.file.path={model_path}", f"data.path={CIFAR10_DIR}", f"calib.num_images={calib_images}"]
    if model == "resnet8":  # raw pixels, as MLCommons trained it
        return common + ["model.name=resnet8", "model.preprocess.scale=1", "model.preprocess.offset=0"]
    return common + ["model.name=mobilenet_a025", f"model.preprocess.size=[{size},{size}]"]


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


def tflite_converted(model: keras.Model, calibration: np.ndarray, mode: str) -> bytes:
    _, ops_set, io_type = CONVERTER_MODES[mode]
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([image[None]] for image in calibration)
    converter.target_spec.supported_ops = [ops_set]
    converter.inference_input_type = io_type
    converter.inference_output_type = io_type
    return converter.convert()


def run_tflite(flatbuffer: bytes, images: np.ndarray) -> np.ndarray:
    interpreter = Interpreter(model_content=flatbuffer, num_threads=1)
    interpreter.allocate_tensors()
    source, sink = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    in_scale, in_zero = source["quantization"]
    out_scale, out_zero = sink["quantization"]
    outputs, limits = [], np.iinfo(source["dtype"])
    for image in images:
        quantized = np.clip(np.round(image / in_scale) + in_zero, limits.min, limits.max).astype(source["dtype"])
        interpreter.set_tensor(source["index"], quantized[None])
        interpreter.invoke()
        outputs.append((interpreter.get_tensor(sink["index"]).astype(np.float32) - out_zero) * out_scale)
    return np.concatenate(outputs)


def tflite_row(model: keras.Model, calibration: np.ndarray, images: np.ndarray, labels: np.ndarray, reference: np.ndarray,
               mode: str = "int8") -> list[str]:
    started = time.perf_counter()
    outputs = run_tflite(tflite_converted(model, calibration, mode), images)
    predicted, float_predicted = outputs.argmax(axis=1), reference.argmax(axis=1)
    return [CONVERTER_MODES[mode][0], f"{np.mean(predicted == labels):.4f}", f"{np.mean(predicted == float_predicted):.4f}",
            f"{sqnr_db(reference, outputs):.2f}", f"{time.perf_counter() - started:.0f}"]


def ours_row(name: str, overrides: list[str], target: str, evaluation) -> list[str]:
    started = time.perf_counter()
    try:
        summary, flagged = run_pipeline(compose(*overrides, *TARGETS[target]), console=Console(stderr=True)), ""
    except QualityFailed as failed:  # measured all the same: the row says a run stops there
        summary = run_pipeline(compose(*overrides, *TARGETS[target], "quality.enforce=false"), console=Console(stderr=True))
        flagged = f" (stopped by {', '.join(sorted({finding.key for finding in failed.findings}))})"
    metrics = summary.metrics
    if "simulate.top1" not in metrics:  # until annotate: the table written as a .tflite, its integers as TFLite's kernels give them
        calibrate = next(result.artifact.directory for result in summary.results if result.stage.name == "calibrate")
        return [f"{target} {name}{flagged} (TFLite's kernels on our .tflite)", *tflite_figures(calibrate, *evaluation),
                f"{time.perf_counter() - started:.0f}"]
    if metrics["simulate.end_point_agreement"] != 1.0 or metrics["codegen.bitexact"] != 1.0:
        raise SystemExit(f"{name}: simulate disagrees with annotate or codegen is not bit-exact: {metrics}")
    # annotate's end points equal simulate's bit for bit (checked above), so its agreement is simulate's
    return [f"{target} {name}{flagged}", f"{metrics['simulate.top1']:.4f}", f"{metrics['annotate.top1_agreement']:.4f}",
            f"{metrics['simulate.sqnr_db_min']:.2f}", f"{time.perf_counter() - started:.0f}"]


def tflite_figures(calibrate: Path, images: np.ndarray, labels: np.ndarray, reference: np.ndarray) -> list[str]:
    """Top-1, agreement with float and SQNR of the calibrated table's .tflite (core/backends/tflite), run on the
    tflite_int8 kernels, which give every tensor TFLite's reference kernels give (tests/test_tflite_export.py)."""
    model = read_tflite_bytes(export_tflite(group_layers(Graph.load(calibrate)), CalibrationTable.load(calibrate)))
    source, sink = (model.tensor(index).quantization for index in (model.inputs[0], model.outputs[0]))
    bits = ACTIVATION_BITS[model.tensor(model.inputs[0]).dtype]
    integers = run_int8(model, affine_quantize(images, float(source.scale[0]), int(source.zero_point[0]), bits))[model.outputs[0]]
    outputs = dequantize(integers, float(sink.scale[0]), int(sink.zero_point[0]))
    predicted = outputs.argmax(axis=1)
    return [f"{np.mean(predicted == labels):.4f}", f"{np.mean(predicted == reference.argmax(axis=1)):.4f}", f"{sqnr_db(reference, outputs):.2f}"]


def read_tflite_bytes(content: bytes):
    with tempfile.NamedTemporaryFile(suffix=".tflite") as file:
        file.write(content)
        file.flush()
        return read_tflite(file.name)


def float_model(model: str, model_path: Path, cfg, size: int, epochs: int) -> keras.Model:
    """The float Keras model, saved at `model_path` for the pipeline."""
    if model == "resnet8":
        keras_model = keras.models.load_model(RESNET8, compile=False)
    else:
        train_images, train_labels = dataset(cfg, cfg.data.calib_split, None)
        keras_model = train(train_images, train_labels, size, epochs)
    keras_model.save(model_path)
    return keras_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("mobilenet", "resnet8"), default="mobilenet")
    parser.add_argument("--targets", default="tf2ir,tflite_int8", help=f"any of: {', '.join(TARGETS)}")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--calib-images", type=int, default=256)
    parser.add_argument("--configs", default=",".join(CONFIGURATIONS), help=f"any of: {', '.join(CONFIGURATIONS)}")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not CIFAR10_DIR.is_dir() or (args.model == "resnet8" and not RESNET8.is_file()):
        sys.exit(f"needs CIFAR-10 at {CIFAR10_DIR}" + (f" and {RESNET8}" if args.model == "resnet8" else ""))
    for flag, given, known in (("--configs", args.configs, CONFIGURATIONS), ("--targets", args.targets, TARGETS)):
        if set(given.split(",")) - set(known):
            sys.exit(f"{flag}: unknown {sorted(set(given.split(',')) - set(known))}; choose from {list(known)}")
    with tempfile.TemporaryDirectory(prefix="ptq_vs_tflite_") as scratch:
        work = Path(scratch)
        model_path = work / f"{args.model}.keras"
        base = model_overrides(work, model_path, args.size, args.calib_images, args.model)
        cfg = compose(*base)
        model = float_model(args.model, model_path, cfg, args.size, args.epochs)
        calibration, _ = dataset(cfg, cfg.data.calib_split, args.calib_images)
        test_images, test_labels = dataset(cfg, cfg.data.eval_split, cfg.data.eval_num_images)
        reference = model.predict(test_images, batch_size=128, verbose=0)
        print(f"float top-1 {np.mean(reference.argmax(axis=1) == test_labels):.4f} on {len(test_labels)} test images", file=sys.stderr)
        rows = [["float (Keras)", f"{np.mean(reference.argmax(axis=1) == test_labels):.4f}", "1.0000", "", ""]]
        for mode in ("int8", "16x8") if "tflite_int16x8" in args.targets.split(",") else ("int8",):
            rows.append(tflite_row(model, calibration, test_images, test_labels, reference, mode))
            print(" | ".join(rows[-1]), file=sys.stderr)
        for target in args.targets.split(","):
            for name in args.configs.split(","):
                rows.append(ours_row(name, base + CONFIGURATIONS[name], target, (test_images, test_labels, reference)))
                print(" | ".join(rows[-1]), file=sys.stderr)
    publish(COLUMNS, rows, args.out or ROOT / "bench" / "out" / f"ptq_vs_tflite_{args.model}.md")


if __name__ == "__main__":
    main()
