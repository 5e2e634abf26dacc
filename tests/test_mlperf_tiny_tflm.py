"""target.scheme.runtime=tflm: MLCommons' four int8 MLPerf Tiny models as trained (calib.method=qat), every stage, on the host
(target=tflite_int8) and on the accelerator (target=accel_tflite): simulate agrees with TensorFlow Lite for
Microcontrollers' interpreter on every layer, and the generated program gives every output byte TFLM's interpreter gives
(ResNet-8 on CIFAR-10 test images, the others on seeded int8 inputs, as no labelled data for them ships). The default
run takes the autoencoder on the host (FULLY_CONNECTED only: where TFLM and LiteRT differ most) and ResNet-8 on the
accelerator; `--slow` the other six."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.console import Console

from conftest import CIFAR10_DIR, MODELS, compose
from core.backends.c.build import compile_program, run_program
from core.backends.program import generate_program
from core.data.datasets import load_cifar10
from core.frontend.tflite import read_tflite
from core.ir.io import read_ir
from core.quantize.tflite_reference import MicroRunner
from pipeline.main import run_pipeline
from stages.codegen import read_plan
from stages.partition import PLAN_FILE

FILES = {"resnet8": MODELS / "mlperf_tiny_resnet8" / "pretrainedResnet_quant.tflite",
         "vww": MODELS / "mlperf_tiny_vww" / "vww_96_int8.tflite",
         "kws": MODELS / "mlperf_tiny_kws" / "kws_ref_model.tflite",
         "ad": MODELS / "mlperf_tiny_ad" / "ad01_int8.tflite"}
TARGETS = ("tflite_int8", "accel_tflite")
DEFAULT_RUN = {("ad", "tflite_int8"), ("resnet8", "accel_tflite")}
IMAGES = 96  # evaluation images (or seeded inputs) per model


def _cases() -> list:
    return [pytest.param(model, target, marks=[] if (model, target) in DEFAULT_RUN else [pytest.mark.slow], id=f"{model}-{target}")
            for model in FILES for target in TARGETS]


def _int8_inputs(model: str, path) -> np.ndarray:
    """The file's int8 inputs: CIFAR-10's pixels for ResNet-8 (int8 = pixel - 128), else seeded over all of int8."""
    if model == "resnet8":
        images, _ = load_cifar10(CIFAR10_DIR, "test_batch")
        return (images[:IMAGES].astype(np.int16) - 128).astype(np.int8)
    shape = read_tflite(path).tensor(read_tflite(path).inputs[0]).shape[1:]
    inputs = np.random.default_rng(7).integers(-128, 128, (IMAGES, *shape)).astype(np.int8)
    inputs[0], inputs[1] = -128, 127
    return inputs


def _data_overrides(model: str, path, inputs: np.ndarray, tmp_path) -> list[str]:
    """ResNet-8 reads CIFAR-10 as raw pixels; the others an .npz of the inputs dequantized at the file's input scale and
    zero point, which calib.method=qat quantizes back to the same integers."""
    if model == "resnet8":
        return [f"data.path={CIFAR10_DIR}", "model.preprocess.scale=1", "model.preprocess.offset=0", f"data.eval_num_images={IMAGES}"]
    quantization = read_tflite(path).tensor(read_tflite(path).inputs[0]).quantization
    values = (float(quantization.scale[0]) * (inputs.astype(np.float32) - int(quantization.zero_point[0]))).astype(np.float32)
    arrays = tmp_path / "inputs.npz"
    np.savez(arrays, calib=values, eval=values)
    return ["data=arrays", f"data.path={arrays}", "model.task=detection", "quality.enforce=false"]


@pytest.mark.parametrize("model, target", _cases())
def test_mlperf_tiny_int8_models_give_tflms_every_output_byte(workspace, tmp_path, model, target):
    path = FILES[model]
    if not path.exists() or (model == "resnet8" and not CIFAR10_DIR.exists()):
        pytest.skip(f"{path} or {CIFAR10_DIR} is missing: the shared test data are not beside the checkout")
    inputs = _int8_inputs(model, path)
    cfg = compose(*workspace, "model=keras_cifar10", "model.format=tflite", f"model.file.path={path}", f"model.name={model}",
                  "model.preprocess.resize=none", f"target={target}", "target.scheme.runtime=tflm", "calib.method=qat",
                  *_data_overrides(model, path, inputs, tmp_path))
    summary = run_pipeline(cfg, console=Console(file=io.StringIO(), width=400))
    metrics = summary.metrics
    assert metrics["simulate.reference_agreement"] == 1.0 and metrics["simulate.layer_agreement_min"] == 1.0
    assert metrics["simulate.end_point_agreement"] == 1.0 and metrics["codegen.bitexact"] == 1.0
    artifacts = {result.stage.name: result.artifact.directory for result in summary.results}
    program = generate_program(read_ir(artifacts["emit_ir"]), read_plan(artifacts["partition"] / PLAN_FILE))
    binary = compile_program(program.write(tmp_path / "program"))
    (end_point,) = program.end_points
    images = inputs.reshape(len(inputs), *program.input_shape)  # a vector is the 1 x 1 x C image the IR takes
    ours = run_program(binary, program, images, tmp_path / "run").outputs[end_point].reshape(len(inputs), -1)
    theirs = MicroRunner(path).tensors(inputs)[read_tflite(path).outputs[0]].reshape(len(inputs), -1)
    assert np.array_equal(ours, theirs)
