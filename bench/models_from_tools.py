"""The files users bring from other tools, through the pipeline: PyTorch models of 2026's families (bench/torch_models.py:
raw-audio M5, MobileNetV3-like, ResNet-like, ConvNeXt-like, MLP-Mixer-like, a CNN classifying the NCHW flatten, an
nn.TransformerEncoderLayer on nn.Embedding, an nn.LSTM), briefly trained on CIFAR-10 (../shared) or seeded sequences,
converted by LiteRT's converter (litert-torch) to float .tflite files, each run as a user runs it
(`model.format=tflite data=arrays`) on tflite_int8, accel_tflite and tf2ir. ai-edge-quantizer's static int8 PTQ of the
same float file is the peer (TFLite's converter cannot quantize a PyTorch source). Needs `make setup-torch` (the
converter, in .venv/torch) and `make setup-peers`:

    .venv/bin/python bench/models_from_tools.py [--models m5,mobile,...] [--out bench/out/models_from_tools.md]

Per model: the stages reached on each target (8 = every stage; else the refusal's first line), end-point SQNR against
the float file on its evaluation inputs (ours: emit_ir's model.tflite; the peer's file; both run by LiteRT's reference
kernels), whether every stage agreed bit for bit (simulate.reference_agreement and codegen.bitexact), and the share of
MACs on the accelerator. Prints the table and writes it to --out."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

import numpy as np  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402
from ai_edge_quantizer import quantizer, recipe  # noqa: E402  (the peers extra: make setup-peers)
from rich.console import Console  # noqa: E402

from conftest import CIFAR10_DIR, compose, tracking_override  # noqa: E402
from core.data.datasets import load_cifar10  # noqa: E402
from core.quantize.evaluation import sqnr_db  # noqa: E402
from pipeline.main import run_pipeline  # noqa: E402
from pipeline.runner import StageFailed  # noqa: E402
from ptq_vs_peers import evaluate  # noqa: E402
from tables import publish  # noqa: E402

TORCH_PYTHON = ROOT / ".venv" / "torch" / "bin" / "python"
TARGETS = ("tflite_int8", "accel_tflite", "tf2ir")
COLUMNS = ("tool", "model", "stages: tflite_int8 / accel_tflite / tf2ir", "SQNR ours (dB)", "SQNR ai-edge-quantizer (dB)",
           "bit-exact", "MACs on the accelerator")


def converted(work: Path, models: str) -> list[dict]:
    """Each model built, trained and converted by litert-torch in the torch environment: bench/torch_models.py's manifest."""
    if not TORCH_PYTHON.exists():
        sys.exit(f"{TORCH_PYTHON}: no torch environment; run `make setup-torch` (litert-torch, torch: about 2 GB)")
    batches = [load_cifar10(CIFAR10_DIR, name) for name in ("data_batch_1", "test_batch")]  # trained on the first, scored on the second
    images, labels = (np.concatenate(parts) for parts in zip(*batches))
    np.savez(cifar := work / "cifar.npz", images=(images.transpose(0, 3, 1, 2) / 255.0).astype(np.float32), labels=labels)
    subprocess.run([str(TORCH_PYTHON), str(ROOT / "bench" / "torch_models.py"), "--out", str(work), "--images", str(cifar),
                    "--models", models], check=True)
    return json.loads((work / "manifest.json").read_text())


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


def ours(entry: dict, target: str, work: Path):
    """The pipeline on the float file: (its summary, None) or (None, the refusal's first line)."""
    overrides = ["model=keras_cifar10", f"model.name={entry['name']}", f"model.file.path={entry['file']}", "model.format=tflite",
                 "data=arrays", f"data.path={entry['arrays']}", f"model.num_classes={entry['classes']}", f"target={target}",
                 f"store.url={work / 'store'}", f"store.cache_dir={work / 'cache'}", tracking_override(work)]
    try:
        return run_pipeline(compose(*overrides), console=Console(file=io.StringIO(), width=200)), None
    except StageFailed as failure:
        return None, str(failure).splitlines()[0][:200]


def measure(entry: dict, work: Path) -> list[str]:
    print(f"{entry['name']}: our PTQ on {', '.join(TARGETS)}, then ai-edge-quantizer's", file=sys.stderr, flush=True)
    with np.load(entry["arrays"]) as arrays:
        calibration, evaluation = arrays["calib"], arrays["eval"][:200]
    reference = float_outputs(Path(entry["file"]), evaluation)
    runs = {target: ours(entry, target, work) for target in TARGETS}
    reached = " / ".join("8" if summary is not None else "refused" for summary, _ in runs.values())
    refusal = next((reason for _, reason in runs.values() if reason), "")
    summary = runs["tflite_int8"][0]
    mine, exact, share = "", "", ""
    if summary is not None:
        emit_ir = next(result.artifact.directory for result in summary.results if result.stage.name == "emit_ir")
        mine = f"{sqnr_db(reference, evaluate((emit_ir / 'model.tflite').read_bytes(), evaluation)[0]):.1f}"
        bit_exact = [run.metrics.get("simulate.reference_agreement", 1.0) == 1.0 and run.metrics.get("codegen.bitexact") == 1.0
                     for run, _ in runs.values() if run is not None]
        exact = "yes" if all(bit_exact) else "no"
    accelerated = runs["accel_tflite"][0]
    if accelerated is not None:
        share = f"{accelerated.metrics.get('partition.mac_share_accel', 0.0):.1%}"
    try:
        peer = f"{sqnr_db(reference, evaluate(peer_file(Path(entry['file']), calibration[:128], work), evaluation)[0]):.1f}"
    except Exception as error:  # the peer's own refusal of a file is a result here, not a crash of the bench
        peer = f"fails: {type(error).__name__}"
    return ["litert-torch", entry["family"], reached + (f" ({refusal})" if refusal else ""), mine, peer, exact, share]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="m5,mobile,resnet,convnext,mixer,flattened,encoder,lstm")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "models_from_tools.md")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="models_from_tools_") as scratch:
        work = Path(scratch)
        rows = [measure(entry, work) for entry in converted(work, arguments.models)]
    publish(COLUMNS, rows, arguments.out)


if __name__ == "__main__":
    main()
