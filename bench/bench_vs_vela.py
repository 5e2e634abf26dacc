"""Our accelerator compiler (target=accel_tflite) against Arm's Vela on the same int8 `.tflite` files: MLCommons' four
MLPerf Tiny models (../shared/models/mlperf_tiny_*), side by side per model and per layer.

    make setup-vela && .venv/bin/python bench/bench_vs_vela.py [--only ResNet-8 ...]

Vela (the `vela` extra, pinned in requirements-vela.lock) compiles each file for Ethos-U55 with 256 MACs per cycle, its
default `Ethos_U55_High_End_Embedded` system and `Shared_Sram` memory mode (weights in off-chip flash, activations in
SRAM); its figures are read from the summary and per-layer CSV files it writes. Ours: the file read
(`model.format=tflite`), partitioned for conf/target/accel_tflite.yaml, its program generated and run on the ISA
simulator over 4 random inputs, every output byte checked against the host kernels (TFLite's reference arithmetic),
then costed by the target's cost model (core/backends/accel/cost.py), host layers included.

Per model: layers (ours: on the accelerator / all; Vela: on the NPU / all, an operator it decomposes one layer), MACs,
estimated cycles, MACs per cycle, weight bytes in flash (ours: the constant segment as stored; Vela: its encoded weights and the whole flash it uses),
all flash (ours: the constants and the instruction streams; Vela: its Ethos-U operator's read-only tensor and command stream),
activation bytes (ours: the tensor arena; Vela: its SRAM), compile time. Per layer (bench/out/bench_vs_vela_<model>.md):
each layer's MACs and cycles, ours beside Vela's operators of the same output tensor (all the operators Vela decomposes it
into: a SOFTMAX's 29).
"""

from __future__ import annotations

import argparse
import csv
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
from conftest import MODELS  # noqa: E402
from core.backends.accel.cost import CostModel  # noqa: E402
from ethosu.vela.tflite.Model import Model  # noqa: E402  (the vela extra: make setup-vela)
from core.backends.accel.partition import partition  # noqa: E402
from core.backends.accel.target import load_target  # noqa: E402
from core.backends.c.build import compile_program, run_program  # noqa: E402
from core.backends.program import generate_program  # noqa: E402
from core.frontend.tflite import read_tflite  # noqa: E402
from core.ir.simulator import IntegerSimulator  # noqa: E402
from core.ir.tflite_ir import ir_of_tflite  # noqa: E402
from core.reports.cycles import cycles_per_layer  # noqa: E402
from tables import publish  # noqa: E402  (bench/tables.py)

FILES = {"ResNet-8": "mlperf_tiny_resnet8/pretrainedResnet_quant.tflite", "visual wake words": "mlperf_tiny_vww/vww_96_int8.tflite",
         "keyword spotting": "mlperf_tiny_kws/kws_ref_model.tflite", "anomaly detection": "mlperf_tiny_ad/ad01_int8.tflite"}
VELA_ARGS = ("--accelerator-config", "ethos-u55-256", "--system-config", "Ethos_U55_High_End_Embedded", "--memory-mode", "Shared_Sram",
             "--verbose-performance")
COLUMNS = ("model", "layers: ours on accel / Vela on NPU", "MACs", "cycles: ours / Vela", "MACs per cycle: ours / Vela", "vs Vela",
           "weight bytes: ours in flash / Vela encoded (its flash)",
           "all flash: ours (constants + instruction streams) / Vela (read-only + command stream)", "activation bytes: ours arena / Vela SRAM",
           "compile s: ours / Vela", "ours bit-exact")
COMMAND_STREAM = "ethos_u_command_stream"  # the Ethos-U operator's input that Vela's command stream is
LAYER_COLUMNS = ("layer (output tensor)", "operator", "ours: where", "MACs", "ours: cycles", "Vela: cycles", "ours / Vela")


@dataclass
class Vela:
    summary: dict[str, str]
    layers: dict[str, dict[str, float]]  # C name of the output tensor -> its operators' cycles, MACs, operator
    seconds: float
    flash_bytes: dict[str, int]  # its Ethos-U operator's constant inputs: the command stream and the read-only tensor


@dataclass
class Ours:
    layers: str
    macs: float
    cycles: float
    constant_bytes: int
    instruction_bytes: int  # the accelerator functions' instruction streams, in flash beside the constants
    arena_bytes: int
    seconds: float
    bitexact: bool
    per_layer: list[tuple[str, str, str, float, float]]  # name, operation, where, MACs, cycles


def c_name(tensor: str) -> str:
    """A tensor name as the IR names the layer that writes it (core/ir/tflite_ir.py)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", tensor)


def run_vela(path: Path, work: Path) -> Vela:
    vela = shutil.which("vela", path=str(Path(sys.executable).parent)) or shutil.which("vela")
    if vela is None:
        sys.exit("needs Arm's Vela: make setup-vela")
    started = time.perf_counter()
    subprocess.run([vela, *VELA_ARGS, "--output-dir", str(work), str(path)], check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    (summary,) = csv.DictReader((work / f"{path.stem}_summary_Ethos_U55_High_End_Embedded.csv").open())
    layers = vela_layers(csv.DictReader((work / f"{path.stem}_per-layer.csv").open()))
    return Vela(summary, layers, seconds, vela_flash((work / f"{path.stem}_vela.tflite").read_bytes()))


def vela_flash(compiled: bytes) -> dict[str, int]:
    """The bytes of each constant input of the Ethos-U operators in Vela's output file, by name (its command stream, its
    read-only tensor of weights, scales and biases), read with Vela's own flatbuffer classes."""
    model = Model.GetRootAsModel(compiled, 0)
    graph, sizes = model.Subgraphs(0), {}
    for index in range(graph.OperatorsLength()):
        operator = graph.Operators(index)
        if model.OperatorCodes(operator.OpcodeIndex()).CustomCode() != b"ethos-u":
            continue
        for position in range(operator.InputsLength()):
            tensor = graph.Tensors(operator.Inputs(position))
            name = tensor.Name().decode()
            sizes[name] = sizes.get(name, 0) + model.Buffers(tensor.Buffer()).DataLength()
    return sizes


# Vela decomposes some operators into several NPU operators (a SOFTMAX into 29 on ResNet-8), each writing a tensor named
# `<input>_<operator>_<k>` (or `..._<k>_broadcasted`) but the last, which writes the operator's output
DECOMPOSED = re.compile(r"_(?P<operator>[a-z]+)_\d+(_[a-z]+)?_?$")


def vela_layers(rows) -> dict[str, dict[str, float]]:
    """Per output tensor (its C name): the cycles and MACs of the Vela operators that compute it, a decomposed operator's
    every part counted at its output, and how many operators they are."""
    layers: dict[str, dict[str, float]] = {}
    pending = {"cycles": 0.0, "macs": 0.0, "operators": 0}
    for row in rows:
        cycles, macs = float(row["Op Cycles"]), float(row["MAC Count"])
        part = DECOMPOSED.search(row["Name"])
        if part is not None and part["operator"] == row["Original Operator"].lower():
            pending = {"cycles": pending["cycles"] + cycles, "macs": pending["macs"] + macs, "operators": pending["operators"] + 1}
            continue
        entry = layers.setdefault(c_name(row["Name"]), {"cycles": 0.0, "macs": 0.0, "operators": 0, "operator": row["Original Operator"],
                                                        "target": row["Target"]})
        entry["cycles"] += cycles + pending["cycles"]
        entry["macs"] += macs + pending["macs"]
        entry["operators"] += 1 + pending["operators"]
        pending = {"cycles": 0.0, "macs": 0.0, "operators": 0}
    return layers


def run_ours(path: Path, accelerator, work: Path) -> Ours:
    started = time.perf_counter()
    ir = ir_of_tflite(read_tflite(path))
    plan = partition(ir, accelerator)
    program = generate_program(ir, plan)
    program_c = program.write(work)
    seconds = time.perf_counter() - started
    inputs = np.random.default_rng(1).integers(-128, 128, (4, *ir.input_shape)).astype(np.int8)
    expected = IntegerSimulator(ir).run_int8(inputs)
    outputs = run_program(compile_program(program_c, work / "network", defines=("QT_PORTABLE",)), program, inputs, work / "run").outputs
    bitexact = all(np.array_equal(outputs[name].reshape(expected[name].shape), expected[name]) for name in program.end_points)
    cycles = cycles_per_layer(program, CostModel.of(accelerator), [group.layer for group in plan.groups])
    groups = {group.layer: group for group in plan.groups}
    per_layer = [(name, groups[name].operation if name in groups else "layout change", groups[name].target if name in groups else "host",
                  groups[name].macs if name in groups else 0.0, stats["cycles"]) for name, stats in cycles.items()]
    metrics = plan.metrics()
    return Ours(f"{metrics['layers_accel']}/{metrics['layers']}", metrics["macs"], program.statistics["cycles_total"],
                program.constant_bytes, sum(len(function.binary) for function in program.functions), program.arena_bytes, seconds,
                bitexact, per_layer)


def layer_rows(ours: Ours, vela: Vela) -> list[list[str]]:
    rows = []
    for name, operation, where, macs, cycles in ours.per_layer:
        layer = vela.layers.get(name, {})
        theirs = layer.get("cycles")
        parts = f" ({int(layer['operators'])} operators)" if layer.get("operators", 1) > 1 else ""
        rows.append([name[:60], operation, where, f"{macs:.0f}", f"{cycles:.0f}", "-" if theirs is None else f"{theirs:.0f}{parts}",
                     "-" if not theirs else f"{cycles / theirs:.2f}"])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=list(FILES), help="models to run (default: all four)")
    chosen = parser.parse_args().only or list(FILES)
    _, accelerator = load_target(ROOT / "conf" / "target" / "accel_tflite.yaml")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-vs-vela-") as directory:
        for label in chosen:
            path = MODELS / FILES[label]
            if not path.exists():
                sys.exit(f"needs {path}")
            work = Path(directory) / c_name(label)
            (work / "vela").mkdir(parents=True)
            (work / "ours").mkdir()
            vela = run_vela(path, work / "vela")
            ours = run_ours(path, accelerator, work / "ours")
            summary = vela.summary
            vela_cycles, vela_macs = float(summary["cycles_total"]), float(summary["nn_macs"])
            npu = sum(layer["target"] == "NPU" for layer in vela.layers.values())
            rows.append([label, f"{ours.layers} / {npu}/{len(vela.layers)}", f"{ours.macs / 1e6:.2f} M",
                         f"{ours.cycles:.0f} / {vela_cycles:.0f}", f"{ours.macs / ours.cycles:.1f} / {vela_macs / vela_cycles:.1f}",
                         f"{(ours.macs / ours.cycles) / (vela_macs / vela_cycles):.2f}x",
                         f"{ours.constant_bytes / 1024:.1f} KiB / {float(summary['total_npu_encoded_weights']) / 1024:.1f} KiB "
                         f"({float(summary['off_chip_flash_memory_used']):.1f} KiB)",
                         f"{(ours.constant_bytes + ours.instruction_bytes) / 1024:.1f} KiB ({ours.instruction_bytes / 1024:.1f} of "
                         f"instructions) / {sum(vela.flash_bytes.values()) / 1024:.1f} KiB "
                         f"({vela.flash_bytes.get(COMMAND_STREAM, 0) / 1024:.1f} of commands)",
                         f"{ours.arena_bytes / 1024:.1f} KiB / {float(summary['sram_memory_used']):.1f} KiB",
                         f"{ours.seconds:.2f} / {vela.seconds:.2f}", "yes" if ours.bitexact else "NO"])
            publish(LAYER_COLUMNS, layer_rows(ours, vela), ROOT / "bench" / "out" / f"bench_vs_vela_{c_name(label)}.md")
    publish(COLUMNS, rows, ROOT / "bench" / "out" / "bench_vs_vela.md")
    return 0 if all(row[-1] == "yes" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
