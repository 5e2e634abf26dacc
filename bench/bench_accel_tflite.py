"""Seed 004 Fig. 4(a) against 4(b) on the accelerator running the tflite_int8 scheme (conf/target/accel_tflite.yaml):
the bias added by the vector ALU after a GEMM RESET, or loaded into the accumulators before the GEMMs.

    .venv/bin/python bench/bench_accel_tflite.py

On MLCommons' int8 ResNet-8 (../shared) and on a MobileNet-v1-style int8 model (alpha 0.5, 128 x 128 x 3, ten
classes: Keras' depthwise-separable blocks with ReLU6, converted by TensorFlow Lite with random weights and a
random representative set; the instruction stream depends on shapes and on which constants vary per channel,
not on their values): per placement, the instructions by kind, the ALU micro-ops, the bytes moved by DMA,
the cycles the target's cost model estimates (core/backends/accel/cost.py), and the share of MACs on the
accelerator. Both placements' programs are run on the ISA simulator and must give the same bytes as the host
kernels (TFLite's reference arithmetic) on 8 random images.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from conftest import MODELS  # noqa: E402
from core.backends.accel.partition import partition  # noqa: E402
from core.backends.accel.target import load_target  # noqa: E402
from core.backends.c.build import compile_program, run_program  # noqa: E402
from core.backends.program import generate_program  # noqa: E402
from core.frontend.tflite import read_tflite  # noqa: E402
from core.ir.simulator import IntegerSimulator  # noqa: E402
from core.ir.tflite_ir import ir_of_tflite  # noqa: E402
from tables import publish  # noqa: E402  (bench/tables.py)

RESNET8 = MODELS / "mlperf_tiny_resnet8" / "pretrainedResnet_quant.tflite"
PLACEMENTS = {"4(a) bias by the ALU": False, "4(b) bias in the accumulators": True}
COLUMNS = ("model", "placement", "instructions", "LOAD", "GEMM", "of which RESET", "ALU", "ALU micro-ops", "DMA KiB",
           "cycles (estimated)", "vs 4(a)", "MACs on the accelerator")


def mobilenet_style(path: Path) -> Path:
    """A MobileNet-v1-style int8 .tflite: alpha 0.5 at 128 x 128, 'same' padding (no PAD operators), ReLU6."""
    tf.keras.utils.set_random_seed(4)
    layers = tf.keras.layers
    inputs = tf.keras.Input((128, 128, 3))
    x = layers.ReLU(6.0)(layers.BatchNormalization()(layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inputs)))
    for filters, stride in ((32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (256, 2), *[(256, 1)] * 5, (512, 2), (512, 1)):
        x = layers.ReLU(6.0)(layers.BatchNormalization()(layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False)(x)))
        x = layers.ReLU(6.0)(layers.BatchNormalization()(layers.Conv2D(filters, 1, use_bias=False)(x)))
    outputs = layers.Softmax()(layers.Dense(10)(layers.GlobalAveragePooling2D()(x)))
    converter = tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(inputs, outputs))
    rng = np.random.default_rng(0)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)] for _ in range(8))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    path.write_bytes(converter.convert())
    return path


def placement_row(ir, accelerator, work: Path, inputs: np.ndarray, expected: dict) -> tuple[dict, dict]:
    """(the program's statistics, the plan's metrics), after checking its outputs on the ISA simulator."""
    plan = partition(ir, accelerator)
    program = generate_program(ir, plan)
    binary = compile_program(program.write(work), work / "network", defines=("QT_PORTABLE",))
    outputs = run_program(binary, program, inputs, work / "run").outputs
    for name in program.end_points:
        if not np.array_equal(outputs[name].reshape(expected[name].shape), expected[name]):
            sys.exit(f"{accelerator.name}: end point {name} differs from the host kernels")
    return program.statistics, plan.metrics()


def model_rows(label: str, path: Path, accelerator, work: Path) -> list[list[str]]:
    ir = ir_of_tflite(read_tflite(path))
    inputs = np.random.default_rng(1).integers(-128, 128, (8, *ir.input_shape)).astype(np.int8)
    expected = IntegerSimulator(ir).run_int8(inputs)
    rows, baseline = [], None
    for placement, in_accumulators in PLACEMENTS.items():
        stats, metrics = placement_row(ir, dataclasses.replace(accelerator, bias_in_accumulators=in_accumulators), work / placement[:4],
                                       inputs, expected)
        baseline = baseline or stats["cycles"]
        rows.append([label, placement, f"{stats['instructions']:.0f}", f"{stats['count_load']:.0f}", f"{stats['count_gemm']:.0f}",
                     f"{stats['count_gemm_reset']:.0f}", f"{stats['count_alu']:.0f}", f"{stats['alu_micro_ops']:.0f}",
                     f"{(stats['load_bytes'] + stats['store_bytes']) / 1024:.0f}", f"{stats['cycles']:.0f}",
                     f"{stats['cycles'] / baseline:.3f}", f"{metrics['mac_share_accel']:.2%} of {metrics['macs'] / 1e6:.1f} M"])
    return rows


def main() -> int:
    if not RESNET8.exists():
        sys.exit(f"needs {RESNET8}")
    _, accelerator = load_target(ROOT / "conf" / "target" / "accel_tflite.yaml")
    with tempfile.TemporaryDirectory(prefix="bench-accel-tflite-") as directory:
        work = Path(directory)
        rows = model_rows("MLPerf Tiny ResNet-8", RESNET8, accelerator, work / "resnet8")
        rows += model_rows("MobileNet-v1-style 0.5, 128x128", mobilenet_style(work / "mobilenet.tflite"), accelerator, work / "mobilenet")
    publish(COLUMNS, rows, ROOT / "bench" / "out" / "bench_accel_tflite.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
