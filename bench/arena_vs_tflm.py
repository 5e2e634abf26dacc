"""The generated program's tensor memory against TensorFlow Lite for Microcontrollers' arena, on MLCommons' four int8
MLPerf Tiny files: our `codegen.arena_bytes` (one arena for every tensor, the input and the outputs among them, planned
by liveness, largest first: core/backends/c/program.py plan_buffers) on the host (target=tflite_int8) and on the
accelerator (accel_tflite, packed layouts), and the layers' own static scratch beside it (codegen.scratch_bytes: the
portable C's padded input copies and int16 weights), beside what TFLM's RecordingMicroAllocator reports for the same
file: its head (the tensors and the kernels' scratch buffers, planned by its GreedyMemoryPlanner) and its tail (the
interpreter's persistent structures: per-channel multipliers, node structs).

    .venv/bin/python bench/arena_vs_tflm.py
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
from tflite_micro.python.tflite_micro import runtime as tflm  # noqa: E402

from conftest import MODELS  # noqa: E402
from core.backends.accel.partition import partition  # noqa: E402
from core.backends.program import generate_program  # noqa: E402
from core.frontend.tflite import read_tflite  # noqa: E402
from core.ir.tflite_ir import ir_of_tflite  # noqa: E402
from core.quantize.runtimes import RUNTIMES  # noqa: E402
from stages.partition import target_accelerator  # noqa: E402
from tables import publish  # noqa: E402  (bench/tables.py)

import yaml  # noqa: E402

FILES = {"ResNet-8": "mlperf_tiny_resnet8/pretrainedResnet_quant.tflite", "visual wake words": "mlperf_tiny_vww/vww_96_int8.tflite",
         "keyword spotting": "mlperf_tiny_kws/kws_ref_model.tflite", "anomaly detection": "mlperf_tiny_ad/ad01_int8.tflite"}
COLUMNS = ("model", "ours: tflite_int8 arena (+ layer scratch)", "ours: accel_tflite arena (+ layer scratch)", "TFLM arena head (tensors, scratch)",
           "TFLM arena total")


def tflm_allocations(path: Path) -> dict[str, int]:
    """RecordingMicroAllocator's figures for the file, read from what it prints (to the process's stderr)."""
    interpreter = tflm.Interpreter.from_bytes(path.read_bytes(), arena_size=8 << 20)
    detail = interpreter.get_input_details(0)
    interpreter.set_input(np.zeros(detail["shape"], detail["dtype"]), 0)
    interpreter.invoke()
    with tempfile.TemporaryFile() as capture:
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            interpreter.print_allocations()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        capture.seek(0)
        text = capture.read().decode()
    return {kind: int(value) for kind, value in re.findall(r"Arena allocation (total|head|tail) (\d+) bytes", text)}


def our_arena(path: Path, target: str) -> str:
    """codegen.arena_bytes (+ codegen.scratch_bytes) of the file's program on `target`."""
    ir = ir_of_tflite(read_tflite(path), runtime=RUNTIMES["tflm"])
    config = yaml.safe_load((ROOT / "conf" / "target" / f"{target}.yaml").read_text())
    name, accelerator = target_accelerator(config)
    program = generate_program(ir, partition(ir, accelerator, name))
    return f"{program.arena_bytes:,} (+ {program.scratch_bytes:,})"


def main() -> None:
    rows = []
    for model, relative in FILES.items():
        path = MODELS / relative
        if not path.is_file():
            sys.exit(f"needs {path} (../shared)")
        micro = tflm_allocations(path)
        rows.append([model, our_arena(path, "tflite_int8"), our_arena(path, "accel_tflite"), f"{micro['head']:,}", f"{micro['total']:,}"])
        print(" | ".join(rows[-1]), file=sys.stderr)
    publish(COLUMNS, rows, ROOT / "bench" / "out" / "arena_vs_tflm.md")


if __name__ == "__main__":
    main()
