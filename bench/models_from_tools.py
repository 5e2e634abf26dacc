"""The files users bring from other tools, through the pipeline: PyTorch models of 2026's families (bench/torch_models.py:
raw-audio M5, MobileNetV3-like, ResNet-like, ConvNeXt-like, MLP-Mixer-like, a CNN classifying the NCHW flatten, a CNN of
nn.PReLU, a ViT as timm writes it, an nn.TransformerEncoderLayer on nn.Embedding, an nn.LSTM), each converted to a float .tflite two ways: by LiteRT's
converter (litert-torch), and by PyTorch's ONNX export, onnxsim and onnx2tf (channel-last); and keras-hub's
(bench/keras_hub_models.py: MobileNetV3, EfficientNet, ViT, MiT) both as its SavedModel (keras-hub-savedmodel) and
through TFLite's converter (keras-hub). Each is briefly trained on CIFAR-10 (../shared) or seeded sequences. Each
file is run as a user runs it (`model.format=tflite` or `saved_model`, `data=arrays`) on tflite_int8, accel_tflite and
tf2ir. The peers on the same source: ai-edge-quantizer's static int8 PTQ of the same float file, and TFLite's
converter's int8 PTQ of the SavedModel (onnx2tf's, keras-hub's; a file from litert-torch has no TensorFlow source for
it to quantize), each calibrated on the 256 samples ours is.
Needs `make setup-torch` (the converters: .venv/torch, .venv/onnx2tf), `make setup-keras-hub` and `make setup-peers`:

    .venv/bin/python bench/models_from_tools.py [--torch-models m5,...] [--keras-hub-models vit,...] [--tools onnx2tf,...] [--out FILE]
        [OVERRIDE ...]

OVERRIDEs are ours, as `run.py` takes them (`calib.method=auto`), on every file and target.

Per file: the stages reached on each target (8 = every stage; else the refusal's first line), end-point SQNR against
the float file on its evaluation inputs (ours: emit_ir's model.tflite; the peers' files; each run by LiteRT's reference
kernels), top-1 of the float file and of ours on the held-out labels, whether every stage agreed bit for bit
(simulate.reference_agreement and codegen.bitexact), and the share of MACs on the accelerator. Prints the table and
writes it to --out (default bench/out/models_from_tools.md)."""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402
from ai_edge_quantizer import quantizer, recipe  # noqa: E402  (the peers extra: make setup-peers)
from rich.console import Console  # noqa: E402

from conftest import CIFAR10_DIR, compose, tracking_override  # noqa: E402
from core.data.datasets import load_cifar10  # noqa: E402
from core.quantize.evaluation import sqnr_db  # noqa: E402
from pipeline.config import ConfigError  # noqa: E402
from pipeline.main import run_pipeline  # noqa: E402
from pipeline.quality import QualityFailed  # noqa: E402
from pipeline.runner import StageFailed  # noqa: E402
from ptq_vs_peers import evaluate  # noqa: E402
from tables import publish  # noqa: E402

TORCH_PYTHON = ROOT / ".venv" / "torch" / "bin" / "python"
ONNX2TF = ROOT / ".venv" / "onnx2tf" / "bin" / "onnx2tf"
ONNXSIM = ONNX2TF.with_name("onnxsim")
KERAS_HUB = ROOT / ".venv" / "keras_hub"  # make setup-keras-hub: beside the project's environment, on PYTHONPATH
# onnx2tf checks its conversion of any 4-D input on this file from its working folder, else downloads it from GitHub
ONNX2TF_SAMPLE = "calibration_image_sample_data_20x128x128x3_float32.npy"
TARGETS = ("tflite_int8", "accel_tflite", "tf2ir")
COLUMNS = ("tool", "model", "stages: tflite_int8 / accel_tflite / tf2ir", "SQNR ours (dB)", "SQNR ai-edge-quantizer (dB)",
           "SQNR TFLite's converter (dB)", "top-1 float / ours", "bit-exact", "MACs on the accelerator")


def converted(work: Path, models: argparse.Namespace, tools: list[str]) -> list[dict]:
    """Each PyTorch model built, trained and written by litert-torch and as ONNX in the torch environment
    (bench/torch_models.py), and each keras-hub model in the project's (bench/keras_hub_models.py): their manifests."""
    torch, keras_hub = bool({"litert-torch", "onnx2tf"} & set(tools)), bool({"keras-hub", "keras-hub-savedmodel"} & set(tools))
    for path, needed, command in ((TORCH_PYTHON, torch, "make setup-torch"), (ONNX2TF, torch, "make setup-torch"),
                                  (KERAS_HUB, keras_hub, "make setup-keras-hub")):
        if needed and not path.exists():
            sys.exit(f"{path}: not installed; run `{command}`")
    batches = [load_cifar10(CIFAR10_DIR, name) for name in ("data_batch_1", "test_batch")]  # trained on the first, scored on the second
    images, labels = (np.concatenate(parts) for parts in zip(*batches))
    np.savez(cifar := work / "cifar.npz", images=(images.transpose(0, 3, 1, 2) / 255.0).astype(np.float32), labels=labels)
    np.save(work / ONNX2TF_SAMPLE, images[:20].repeat(4, axis=1).repeat(4, axis=2).astype(np.float32) / 255.0)
    manifest = []
    beside_keras_hub = {**os.environ, "PYTHONPATH": str(KERAS_HUB)}
    for python, script, names, environment in ((TORCH_PYTHON, "torch_models.py", models.torch if torch else "", None),
                                               (Path(sys.executable), "keras_hub_models.py", models.keras_hub if keras_hub else "",
                                                beside_keras_hub)):
        if names:
            out = work / Path(script).stem
            subprocess.run([str(python), str(ROOT / "bench" / script), "--out", str(out), "--images", str(cifar), "--models", names],
                           check=True, env=environment)
            manifest += json.loads((out / "manifest.json").read_text())
    return manifest


def onnx2tf(onnx: Path, work: Path) -> Path:
    """onnx2tf's float32 .tflite of the ONNX file (beside it, its SavedModel), written as its README shows: channel-last,
    of the file onnxsim simplified first (onnx2tf fails on the exporter's unfolded constants: GELU's sqrt(2), an LSTM's
    zero state, LayerNorm's scale), its RNNs unrolled (`-eru`: else a WHILE loop, which the reader refuses)."""
    simplified = work / f"{onnx.stem}_simplified.onnx"
    folder = work / f"onnx2tf_{onnx.stem}"
    for tool, command in (("onnxsim", [str(ONNXSIM), str(onnx), str(simplified)]),
                          ("onnx2tf", [str(ONNX2TF), "-i", str(simplified), "-o", str(folder), "-n", "-eru"])):
        done = subprocess.run(command, cwd=work, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{tool}: {(done.stderr or done.stdout).strip().splitlines()[-1][:160]}")
    return folder / f"{simplified.stem}_float32.tflite"


def in_layout(arrays: Path, path: Path, work: Path) -> Path:
    """The arrays in the file's input layout: onnx2tf moves PyTorch's channel axis last."""
    shape = tuple(Interpreter(model_path=str(path)).get_input_details()[0]["shape"][1:])
    with np.load(arrays) as stored:
        values = dict(stored)
    for split in ("calib", "eval"):
        if values[split].shape[1:] != shape:
            values[split] = np.moveaxis(values[split], 1, -1)
        assert values[split].shape[1:] == shape, f"{path}: input {shape}, arrays {values[split].shape[1:]}"
    np.savez(moved := work / f"{path.stem}_arrays.npz", **values)
    return moved


def tflite_converter_file(saved_model: Path, calibration: np.ndarray) -> bytes:
    """TFLite's converter's full-integer PTQ of the SavedModel, as its documentation shows."""
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([sample[None]] for sample in calibration)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    return converter.convert()


@dataclass(frozen=True)
class Route:
    """One tool's file in the benchmark: the model ours runs on and its format, the float .tflite every SQNR is against
    (and ai-edge-quantizer quantizes), the arrays in the model's layout, and TFLite's converter's source (None: none)."""

    model: Path
    format: str
    float_file: Path
    arrays: Path
    saved_model: Path | None


def litert_torch_route(source: Path, entry: dict, work: Path) -> Route:
    """litert-torch's file as written: PyTorch's layout, no TensorFlow model beside it."""
    return Route(source, "tflite", source, Path(entry["arrays"]), None)


def onnx2tf_route(source: Path, entry: dict, work: Path) -> Route:
    """onnx2tf's file of the ONNX export, the arrays in its layout, and its SavedModel for TFLite's converter."""
    path = onnx2tf(source, work)
    return Route(path, "tflite", path, in_layout(Path(entry["arrays"]), path, work), path.parent)


def keras_hub_route(source: Path, entry: dict, work: Path) -> Route:
    """TFLite's converter's float file of the keras-hub model, and the SavedModel it was converted from."""
    return Route(source, "tflite", source, Path(entry["arrays"]), Path(entry["files"]["keras-hub-savedmodel"]))


def keras_hub_saved_model_route(source: Path, entry: dict, work: Path) -> Route:
    """The keras-hub model's SavedModel itself (model.format=saved_model), against the float file of it."""
    return Route(source, "saved_model", Path(entry["files"]["keras-hub"]), Path(entry["arrays"]), source)


ROUTES = {"litert-torch": litert_torch_route, "onnx2tf": onnx2tf_route, "keras-hub": keras_hub_route,
          "keras-hub-savedmodel": keras_hub_saved_model_route}


def float_outputs(path: Path, inputs: np.ndarray) -> np.ndarray:
    interpreter = Interpreter(model_path=str(path), num_threads=1)
    interpreter.allocate_tensors()
    source, sink = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    outputs = []
    for sample in inputs:
        interpreter.set_tensor(source["index"], sample[None].astype(source["dtype"]))
        interpreter.invoke()
        outputs.append(interpreter.get_tensor(sink["index"]).reshape(-1))
    return np.stack(outputs)


def peer_file(path: Path, calibration: np.ndarray, work: Path) -> bytes:
    """ai-edge-quantizer's static int8 recipe (int8 weights and activations) on the float file."""
    signature = Interpreter(model_path=str(path)).get_signature_list()
    name = next(iter(signature))
    input_name = signature[name]["inputs"][0]
    tool = quantizer.Quantizer(str(path), recipe.static_wi8_ai8())
    calibrated = tool.calibrate({name: [{input_name: sample[None]} for sample in calibration]})
    tool.quantize(calibrated).export_model(str(out := work / f"{path.stem}_aeq.tflite"), overwrite=True)
    return out.read_bytes()


def ours(name: str, route: Route, classes: int, target: str, work: Path, settings: tuple[str, ...] = ()):
    """The pipeline on the tool's model, with the user's `settings` (Hydra overrides, as `run.py` takes them): (its
    summary, None) or (None, the refusal's first line)."""
    overrides = [*settings, "model=keras_cifar10", f"model.name={name}", f"model.file.path={route.model}", f"model.format={route.format}",
                 "data=arrays", f"data.path={route.arrays}", f"model.num_classes={classes}", f"target={target}", f"store.url={work / 'store'}",
                 f"store.cache_dir={work / 'cache'}", tracking_override(work)]
    try:
        return run_pipeline(compose(*overrides), console=Console(file=io.StringIO(), width=200)), None
    except (StageFailed, ConfigError, QualityFailed) as failure:  # a stage's refusal, preflight's before any stage, or the guard's
        return None, str(failure).splitlines()[0][:200]


def peer(reference: np.ndarray, quantize: partial, evaluation: np.ndarray) -> str:
    """The peer's SQNR, or its own refusal of the file (a result here, not a crash of the benchmark). It quantizes in a
    process of its own (spawned: a fork of TensorFlow's threads deadlocks): TFLite's calibrator dies of a segmentation
    fault on onnx2tf's LSTM (a file of WHILE loops)."""
    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            flatbuffer = pool.submit(quantize).result()
        return f"{sqnr_db(reference, evaluate(flatbuffer, evaluation)[0]):.1f}"
    except BrokenProcessPool:
        return "fails: crashes"
    except Exception as error:
        return f"fails: {type(error).__name__}"


def measure(tool: str, entry: dict, work: Path, settings: tuple[str, ...] = ()) -> list[str]:
    print(f"{tool} {entry['name']}: our PTQ on {', '.join(TARGETS)}, then the peers'", file=sys.stderr, flush=True)
    row = [tool, entry["family"]]
    if entry["files"][tool].startswith("refused"):
        return row + [entry["files"][tool]] + [""] * 6
    try:
        route = ROUTES[tool](Path(entry["files"][tool]), entry, work)
    except RuntimeError as error:
        return row + [f"refused: {error}"] + [""] * 6
    with np.load(route.arrays) as stored:
        calibration, evaluation, labels = stored["calib"], stored["eval"][:200], stored["eval_labels"][:200]
    reference = float_outputs(route.float_file, evaluation)
    runs = {target: ours(f"{entry['name']}_{tool.replace('-', '_')}", route, entry["classes"], target, work, settings) for target in TARGETS}
    reached = " / ".join("8" if summary is not None else "refused" for summary, _ in runs.values())
    refusal = next((reason for _, reason in runs.values() if reason), "")
    summary = runs["tflite_int8"][0]
    mine, top1, exact, share = "", f"{np.mean(reference.argmax(1) == labels):.1%} / ", "", ""
    if summary is not None:
        emit_ir = next(result.artifact.directory for result in summary.results if result.stage.name == "emit_ir")
        outputs = evaluate((emit_ir / "model.tflite").read_bytes(), evaluation)[0]
        mine, top1 = f"{sqnr_db(reference, outputs):.1f}", top1 + f"{np.mean(outputs.argmax(1) == labels):.1%}"
        bit_exact = [run.metrics.get("simulate.reference_agreement", 1.0) == 1.0 and run.metrics.get("codegen.bitexact") == 1.0
                     for run, _ in runs.values() if run is not None]
        exact = "yes" if all(bit_exact) else "no"
    accelerated = runs["accel_tflite"][0]
    if accelerated is not None:
        share = f"{accelerated.metrics.get('partition.mac_share_accel', 0.0):.1%}"
    aeq = peer(reference, partial(peer_file, route.float_file, calibration, work), evaluation)
    converter = "no TF source" if route.saved_model is None else peer(
        reference, partial(tflite_converter_file, route.saved_model, calibration), evaluation)
    return row + [reached + (f" ({refusal})" if refusal else ""), mine, aeq, converter, top1, exact, share]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torch-models", dest="torch", default="m5,mobile,resnet,convnext,mixer,flattened,prelu,vit,encoder,lstm",
                        help="bench/torch_models.py's, for litert-torch and onnx2tf")
    parser.add_argument("--keras-hub-models", dest="keras_hub", default="mobilenet_v3,efficientnet,vit,mit",
                        help="bench/keras_hub_models.py's")
    parser.add_argument("--tools", default=",".join(ROUTES), help=f"of {', '.join(ROUTES)}")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "models_from_tools.md")
    parser.add_argument("settings", nargs="*", help="overrides of ours, as run.py takes them (calib.method=auto)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="models_from_tools_") as scratch:
        work = Path(scratch)
        tools = arguments.tools.split(",")
        rows = [measure(tool, entry, work, tuple(arguments.settings)) for entry in converted(work, arguments, tools) for tool in tools if tool in entry["files"]]
    publish(COLUMNS, rows, arguments.out)


if __name__ == "__main__":
    main()
