"""Our post-training quantization on target=tflite_int8 (the defaults, and calib.method=minmax) against the peers a
TFLite user would run on the same float model: TensorFlow Lite's converter (full-int8 PTQ) and Google's ai-edge-quantizer (static int8 weights and activations,
`make setup-peers`). Every int8 file, ours (emit_ir's model.tflite) and each peer's, is scored by one evaluator on the
same images: LiteRT's reference kernels (BUILTIN_REF), the float input quantized at the file's own input scale, the
outputs dequantized, against the float model's outputs: end-point SQNR (the worst end point, sums over every image, as
simulate.sqnr_db_min) and, where the data have labels, top-1. Every tool calibrates on the same --calib-images.

    .venv/bin/python bench/ptq_vs_peers.py [--models resnet8,vww,ad,mbv1,ssd] [--calib-images 256] [--eval-images 200]

The models: MLPerf Tiny's float ResNet-8 (CIFAR-10, raw pixels), visual wake words (vww_96.h5, Keras 2: CIFAR-10 test
images upscaled to 96x96 and divided by 255, a proxy without labels), the anomaly-detection autoencoder (ad01.h5,
seeded log-mel-like frames: 640 values in [-85, 15]), and the two shipped QAT graphs as the float graphs they contain
(mbv1_cifar10 on CIFAR-10; ssd_mbv2 on motor.jpg and oiltank.jpg, its twelve end points). Prints the table and writes
it to --out (default bench/out/ptq_vs_peers.md). Needs ../shared.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402
from ai_edge_quantizer import quantizer, recipe  # noqa: E402  (the peers extra: make setup-peers)
from rich.console import Console  # noqa: E402

from conftest import CIFAR10_DIR, MBV1_GRAPH, MODELS, SSD_GRAPH, compose  # noqa: E402
from core.data.datasets import load_split  # noqa: E402
from core.frontend.fake_quant import bypass_fake_quant  # noqa: E402
from core.frontend.graph import Graph, canonical_tensor  # noqa: E402
from core.frontend.keras2 import compatible_layers  # noqa: E402
from core.frontend.tf_runtime import GraphRunner  # noqa: E402
from core.quantize.evaluation import sqnr_db  # noqa: E402
from pipeline.main import run_pipeline  # noqa: E402
from pipeline.params import to_plain  # noqa: E402
from tables import publish  # noqa: E402  (bench/tables.py)

COLUMNS = ("model", "quantization", "end-point SQNR (dB)", "top-1")
# our configurations on target=tflite_int8: the defaults (mse, equalization, bias correction, weight mse) and minmax
# ranges over the same (the converter's and ai-edge-quantizer's activation ranges are min/max too)
OURS = {"ours, tflite_int8 defaults (mse, equalization, bias correction, weight mse)": [],
        "ours, tflite_int8 calib.method=minmax (equalization, bias correction, weight mse)": ["calib.method=minmax"]}


@dataclass
class Model:
    """A float model and the data every tool quantizes and is scored on."""

    name: str
    overrides: list[str]  # run.py's, besides the store
    keras_file: Path | None = None  # a Keras model (the converter takes it as a user does); else the float graph
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # data=arrays' .npz, when the data are made here


def models(calib_images: int, eval_images: int) -> dict[str, Model]:
    cifar = [f"data.path={CIFAR10_DIR}", f"data.eval_num_images={eval_images}"]
    frames = np.random.default_rng(0).uniform(-85.0, 15.0, (calib_images + eval_images, 640)).astype(np.float32)
    return {
        "resnet8": Model("ResNet-8 (MLPerf Tiny .h5)", ["model=keras_cifar10", *cifar, "model.preprocess.scale=1", "model.preprocess.offset=0"],
                         MODELS / "mlperf_tiny_resnet8" / "pretrainedResnet.h5"),
        "vww": Model("visual wake words (MLPerf Tiny .h5)", ["model=keras_cifar10", *cifar, "model.preprocess.size=[96,96]",
                                                             "model.preprocess.scale=255", "model.preprocess.offset=0", "model.task=detection"],
                     MODELS / "mlperf_tiny_vww" / "vww_96.h5"),
        "ad": Model("anomaly detection (MLPerf Tiny .h5)", ["model=keras_cifar10", "data=arrays", "model.task=detection"],
                    MODELS / "mlperf_tiny_ad" / "ad01.h5", {"calib": frames[:calib_images], "eval": frames[calib_images:]}),
        "mbv1": Model("mbv1_cifar10 (float graph of the QAT graph)", ["model=mbv1_cifar10", f"model.file.path={MBV1_GRAPH}", *cifar]),
        "ssd": Model("ssd_mbv2 (float graph of the QAT graph), 2 photos",
                     ["model=ssd_mbv2", f"model.file.path={SSD_GRAPH}", f"model.test_image.path={SSD_GRAPH.parent / 'test.jpg'}",
                      f"data.path={MODELS}"]),
    }


def run_ours(model: Model, work: Path, calib_images: int, configuration: list[str]) -> tuple[bytes, Graph, object]:
    """Our `configuration` on tflite_int8, every stage: (emit_ir's model.tflite, the float graph, the config)."""
    overrides = [*model.overrides, *configuration, f"store.url={work / 'store'}", f"tracking_uri=sqlite:///{work / 'mlflow.db'}",
                 f"store.cache_dir={work / 'cache'}", f"calib.num_images={calib_images}", "target=tflite_int8"]
    if model.keras_file is not None:
        overrides.append(f"model.file.path={model.keras_file}")
    if model.arrays:
        np.savez(work / "arrays.npz", **model.arrays)
        overrides.append(f"data.path={work / 'arrays.npz'}")
    cfg = compose(*overrides)
    summary = run_pipeline(cfg, console=Console(file=io.StringIO(), width=200))
    artifacts = {result.stage.name: result.artifact.directory for result in summary.results}
    float_graph, _ = bypass_fake_quant(Graph.load(artifacts["fold_check"]))
    return (artifacts["emit_ir"] / "model.tflite").read_bytes(), float_graph, cfg


def data(cfg, split: str, limit: int | None):
    loaded = load_split(cfg.data.kind.value, cfg.data.path, split, to_plain(cfg.model.preprocess), limit=limit)
    labels = loaded.labels if cfg.model.task.value == "classification" else None
    return np.asarray(loaded.images, np.float32), labels


def converter_of(model: Model, float_graph: Graph, work: Path):
    """TFLite's converter of the float model: from the Keras file as a user converts it, else from the float graph saved as
    a SavedModel with a serving signature (which ai-edge-quantizer reads), its end points as outputs output_<k>."""
    if model.keras_file is not None:
        keras_model = keras.models.load_model(model.keras_file, compile=False, custom_objects=compatible_layers(keras.layers))
        return tf.lite.TFLiteConverter.from_keras_model(keras_model)
    graph_def = float_graph.to_graph_def()

    def imported():
        tf.compat.v1.import_graph_def(graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(imported, [])
    pruned = wrapped.prune(wrapped.graph.get_tensor_by_name(canonical_tensor(float_graph.input_tensor)),
                           [wrapped.graph.get_tensor_by_name(canonical_tensor(end)) for end in float_graph.end_points])
    module = tf.Module()

    @tf.function(input_signature=[tf.TensorSpec([1, *float_graph.shape(float_graph.input_tensor)[1:]], tf.float32)],
                 autograph=False)
    def serve(images):
        return {f"output_{k}": value for k, value in enumerate(pruned(images))}

    module.serve = serve
    tf.saved_model.save(module, str(work / "saved_model"), signatures={"serving_default": serve})
    return tf.lite.TFLiteConverter.from_saved_model(str(work / "saved_model"))


def tflite_converter_int8(model: Model, float_graph: Graph, calibration: np.ndarray, work: Path) -> bytes:
    converter = converter_of(model, float_graph, work)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([image[None]] for image in calibration)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    return converter.convert()


def ai_edge_quantizer_int8(model: Model, float_graph: Graph, calibration: np.ndarray, work: Path) -> bytes:
    """ai-edge-quantizer's static int8 recipe (int8 weights and activations, min/max) on the float .tflite."""
    float_file = converter_of(model, float_graph, work).convert()
    interpreter = Interpreter(model_content=float_file)
    signature = interpreter.get_signature_list()
    name = next(iter(signature))
    input_name = signature[name]["inputs"][0]
    tool = quantizer.Quantizer(float_file, recipe.static_wi8_ai8())
    calibrated = tool.calibrate({name: [{input_name: image[None]} for image in calibration]})
    path = work / "aeq.tflite"
    tool.quantize(calibrated).export_model(str(path), overwrite=True)
    return path.read_bytes()


def evaluate(flatbuffer: bytes, images: np.ndarray) -> list[np.ndarray]:
    """Every output of the file on LiteRT's reference kernels, float (dequantized), in the file's output order."""
    interpreter = Interpreter(model_content=flatbuffer, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    source = interpreter.get_input_details()[0]
    outputs = []
    for image in images:
        value = image[None].reshape(source["shape"])
        if source["dtype"] == np.int8:
            scale, zero = source["quantization"]
            value = np.clip(np.round(value / scale) + zero, -128, 127).astype(np.int8)
        interpreter.set_tensor(source["index"], value.astype(source["dtype"]))
        interpreter.invoke()
        row = []
        for sink in interpreter.get_output_details():
            result = interpreter.get_tensor(sink["index"]).astype(np.float32)
            if sink["dtype"] == np.int8:
                result = (result - sink["quantization"][1]) * sink["quantization"][0]
            row.append(result.reshape(-1))
        outputs.append(row)
    return [np.stack([row[k] for row in outputs]) for k in range(len(outputs[0]))]


def matched(reference: list[np.ndarray], outputs: list[np.ndarray]) -> list[np.ndarray]:
    """The file's outputs in the float model's end-point order: by size (a converter may order them otherwise); outputs of
    one size keep their order."""
    pool = list(outputs)
    ordered = []
    for expected in reference:
        index = next(k for k, candidate in enumerate(pool) if candidate.shape == expected.shape)
        ordered.append(pool.pop(index))
    return ordered


def row(label: str, reference: list[np.ndarray], outputs: list[np.ndarray], labels) -> list[str]:
    outputs = matched(reference, outputs)
    sqnr = min(sqnr_db(expected, value) for expected, value in zip(reference, outputs))
    top1 = "" if labels is None else f"{np.mean(outputs[0].argmax(axis=1) == labels):.2%}"
    return [label, f"{sqnr:.1f}", top1]


def measure(key: str, model: Model, calib_images: int, eval_images: int) -> list[list[str]]:
    with tempfile.TemporaryDirectory(prefix=f"ptq_vs_peers_{key}_") as scratch:
        work = Path(scratch)
        ours = {label: run_ours(model, work, calib_images, configuration) for label, configuration in OURS.items()}
        _, float_graph, cfg = next(iter(ours.values()))
        calibration, _ = data(cfg, cfg.data.calib_split, calib_images)
        images, labels = data(cfg, cfg.data.eval_split, cfg.data.eval_num_images)
        with GraphRunner(float_graph) as runner:
            reference = [value.reshape(len(images), -1) for value in runner.run(float_graph.end_points, images, runner.fixed_batch or 32)]
        rows = [["float", "", "" if labels is None else f"{np.mean(reference[0].argmax(axis=1) == labels):.2%}"]]
        for label, (flatbuffer, _, _) in ours.items():
            rows.append(row(label, reference, evaluate(flatbuffer, images), labels))
            print(f"{model.name} | " + " | ".join(rows[-1]), file=sys.stderr)
        for label, tool in (("TFLite converter, full-int8 PTQ", tflite_converter_int8), ("ai-edge-quantizer, static int8", ai_edge_quantizer_int8)):
            try:
                rows.append(row(label, reference, evaluate(tool(model, float_graph, calibration, work), images), labels))
            except Exception as error:  # a peer that cannot take the model is a finding of the table, not the end of it
                rows.append([f"{label}: fails ({type(error).__name__}: {(str(error).splitlines() or [''])[0][:120]})", "", ""])
            print(f"{model.name} | " + " | ".join(rows[-1]), file=sys.stderr)
        return [[model.name, *cells] for cells in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet8,vww,ad,mbv1,ssd")
    parser.add_argument("--calib-images", type=int, default=256)
    parser.add_argument("--eval-images", type=int, default=200)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "ptq_vs_peers.md")
    args = parser.parse_args()
    known = models(args.calib_images, args.eval_images)
    chosen = args.models.split(",")
    if set(chosen) - set(known):
        sys.exit(f"--models: unknown {sorted(set(chosen) - set(known))}; choose from {list(known)}")
    rows = [cells for key in chosen for cells in measure(key, known[key], args.calib_images, args.eval_images)]
    publish(COLUMNS, rows, args.out)


if __name__ == "__main__":
    main()
