"""codegen: the emitted IR as programs that run, proved bit-identical to the integer simulator
(seed 004's two-level code generation).

One generator (core/backends/program.py) for every target: with the partition plan of a target
without an accelerator it is one plain C99 program for the whole network; with an accelerator,
an instruction stream per accelerator function (`<function>.bin` + `<function>.lst`) and the
host C program that packs, unpacks, runs the host layers and drives each function through the
reference ISA simulator (core/backends/accel/runtime/qt_isa.h). The artifact is program.c, its
headers and those streams.

The program is compiled here with `cc <codegen.cflags> -std=c99 -Wall -Werror -ffp-contract=off` (cflags default
-O2, a binary for any x86-64; -O3 -march=native one for this host, with its AVX2 or AVX-512 VNNI int8 microkernels);
a compiler refusal fails the stage with its diagnostics. `int8_simd` says which conv microkernels the build took
(0 portable C, 1 AVX2, 2 AVX-512 VNNI). The binary then runs on the IR's test image (the network input
emit_ir stored) and on the first EVAL_IMAGES evaluation images (quantized as IntegerSimulator
does), and every end point of every image must equal the simulator's: `bitexact` is the
fraction of images that do, and anything below 1.0 fails the stage, naming the first layer
that differs (a -DQT_DUMP_LAYERS build writes every layer's output). `latency_ms_per_image`
is the time inside run_network per evaluation image, single-threaded, best of TIMING_RUNS
runs of the binary over the evaluation images (with an accelerator: simulated on the CPU).
Timings are metrics (the manifest, MLflow), never files of the artifact: identical inputs give a
byte-identical artifact.
Accelerator metrics (`accel_*`): instruction counts by kind and ALU operation, micro-ops, DMA
bytes and the cycles the target's cost model gives.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.backends.accel.cost import CostModel
from core.backends.accel.partition import PartitionPlan
from core.backends.c.build import INT8_SIMD_PATHS, compile_program, compiler_command, first_difference, run_program
from core.backends.c.emitter import CodegenError
from core.backends.c.program import PROGRAM_FILE
from core.backends.program import NetworkProgram, generate_program
from core.data.arrays import NamedSamples
from core.ir.io import param_file, read_ir
from core.ir.network import Ir
from core.ir.op import NETWORK_INPUT, operation_of
from core.ir.simulator import IntegerSimulator
from core.reports.cycles import cycles_per_layer, plot_cycles
from core.reports.series import series_rows, write_series
from stages.evaluation import evaluation_split
from stages.emit_ir import TFLITE_FILE
from stages.partition import PLAN_FILE

EVAL_IMAGES = 100
TIMING_RUNS = 3


class CodegenMismatch(CodegenError):
    """The compiled network and the integer simulator disagree."""


def run(params, inputs: dict[str, Path], out_dir: Path, ctx) -> dict[str, float]:
    ir_dir = Path(inputs["emit_ir"])
    ir = read_ir(ir_dir)
    plan = read_plan(Path(inputs["partition"]) / PLAN_FILE)
    program = generate_program(ir, plan)
    program_c = program.write(out_dir)
    if (ir_dir / TFLITE_FILE).is_file():  # the .tflite a tflite_int8 IR was read from ships beside its C
        shutil.copyfile(ir_dir / TFLITE_FILE, out_dir / TFLITE_FILE)
    ctx.log(f"{PROGRAM_FILE}: {program.source_bytes} bytes of C, {program.constant_bytes} bytes of constants, "
            f"{program.arena_bytes} bytes of tensor arena (the input and end points included), at most {program.scratch_bytes} bytes "
            "of the layers' own scratch")
    accel_metrics = accelerator_metrics(program, plan, out_dir, ctx, params.pictures) if plan.accelerator is not None else {}
    evaluation = evaluation_split(params, limit=EVAL_IMAGES)
    images = program_inputs(ir, ir_dir, evaluation.images)
    eval_inputs = images[1:]
    compiler = compiler_command(params.codegen.cflags)
    checked = build_and_check(ir, program, program_c, images, len(eval_inputs), compiler, ctx)
    report = {
        "program": PROGRAM_FILE,
        "compiler": list(compiler),
        "symbols": program.symbols,
        "inputs": {name: list(shape) for name, shape in program.inputs.items()},
        "end_points": [{"layer": name, "shape": list(program.shapes[name])} for name in program.end_points],
        "images": {"test_image": 1, "evaluation": len(eval_inputs), "source": evaluation.source},
        "bitexact": checked.bitexact,
        "c_source_bytes": program.source_bytes,
        "constant_bytes": program.constant_bytes,
        "arena_bytes": program.arena_bytes,
        "scratch_bytes": program.scratch_bytes,
        "target": plan.target,
        "accelerator": None if plan.accelerator is None else {
            "functions": [{"name": f.name, "layers": f.layers, "instructions": len(f.instructions), "binary": f"{f.name}.bin",
                           "listing": f"{f.name}.lst"} for f in program.functions],
            "metrics": accel_metrics,
        },
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    ctx.log(f"bit-exact on {len(images)} images (the IR's test image + {len(eval_inputs)} evaluation images); "
            f"{checked.latency_ms:.3f} ms per image")
    return {"bitexact": checked.bitexact, "images": len(images), "latency_ms_per_image": checked.latency_ms,
            "c_source_bytes": program.source_bytes, "constant_bytes": program.constant_bytes, "arena_bytes": program.arena_bytes,
            "scratch_bytes": program.scratch_bytes, "compile_s": checked.compile_s, "int8_simd": checked.int8_simd, **accel_metrics}


CYCLE_COLUMNS = ("cycles", "cycles_load", "cycles_gemm", "cycles_alu", "cycles_store", "cycles_host")


def accelerator_metrics(program: NetworkProgram, plan: PartitionPlan, out_dir: Path, ctx, pictures: bool) -> dict[str, float]:
    """`accel_*`: the instruction statistics of the target's cost model, and (where pictures are drawn) the cycles picture."""
    metrics = {f"accel_{key}": value for key, value in program.statistics.items()}
    metrics["accel_functions"] = len(program.functions)
    metrics["accel_instruction_bytes"] = sum(len(function.binary) for function in program.functions)
    metrics["accel_constant_bytes"] = program.accel_constant_bytes
    # the constant segment as stored against as it would be uncompressed (1: the target compresses nothing)
    metrics["accel_compression_ratio"] = program.accel_constant_raw_bytes / max(program.accel_constant_bytes, 1)
    # the whole network's MACs over the cycles of both processors (the host's estimated too): one figure per partition
    metrics["accel_macs_per_cycle"] = plan.metrics()["macs"] / max(metrics["accel_cycles_total"], 1.0)
    per_layer = cycles_per_layer(program, CostModel.of(plan.accelerator), [group.layer for group in plan.groups])
    write_series(out_dir, "cycles", series_rows("layer_index", "layer", {
        column: {layer: stats[column] for layer, stats in per_layer.items()} for column in CYCLE_COLUMNS}))
    if pictures:
        plot_cycles(per_layer, out_dir / "cycles.png",
                    f"target {plan.target}: {metrics['accel_cycles_total']:.0f} cycles estimated per inference "
                    f"({metrics['accel_cycles']:.0f} accelerator, {metrics['accel_cycles_host']:.0f} host), "
                    f"{int(metrics['accel_instructions'])} instructions")
    counts = ", ".join(f"{int(metrics['accel_count_' + kind])} {kind}" for kind in ("load", "gemm", "alu", "store"))
    ctx.log(f"{len(program.functions)} accelerator function(s): {int(metrics['accel_instructions'])} instructions "
            f"({counts}), {metrics['accel_cycles']:.0f} cycles estimated by target {plan.target}'s cost model, "
            f"{metrics['accel_cycles_host']:.0f} more on the host: {metrics['accel_macs_per_cycle']:.1f} MACs per cycle")
    return metrics


@dataclass
class Checked:
    bitexact: float  # the fraction of images whose end points all equal the simulator's
    compile_s: float
    timings: list[float]  # seconds in run_network over the evaluation images, per run
    latency_ms: float  # the best run, per evaluation image
    int8_simd: int  # the conv microkernels the build took (INT8_SIMD_PATHS)


def build_and_check(ir: Ir, program: NetworkProgram, program_c: Path, images: np.ndarray, evaluation: int,
                    compiler: tuple[str, ...], ctx) -> Checked:
    """Compile with `compiler`, run on `images` (the test image first, then `evaluation` images), compare
    every end point with the simulator's (CodegenMismatch naming the first differing layer), time."""
    with tempfile.TemporaryDirectory(prefix="qt-codegen-") as work:
        work = Path(work)
        started = time.perf_counter()
        binary = compile_program(program_c, work / "network", compiler=compiler)
        compile_s = time.perf_counter() - started
        ctx.progress(1, 3)
        expected = IntegerSimulator(ir).run_int8(images)
        result = run_program(binary, program, images, work / "run")
        ctx.log(f"compiled with {' '.join(compiler)} in {compile_s:.1f} s: conv on {INT8_SIMD_PATHS[result.int8_simd]} microkernels")
        matches = np.ones(len(images), dtype=bool)
        for name in program.end_points:
            ours, theirs = result.outputs[name], expected[name].reshape(result.outputs[name].shape)
            matches &= (ours == theirs).reshape(len(images), -1).all(axis=1)
        ctx.progress(2, 3)
        if not matches.all():
            raise CodegenMismatch(explain_mismatch(ir, program, program_c, images, matches, compiler, work))
        timings = [run_program(binary, program, images[1:], work / "time").seconds for _ in range(TIMING_RUNS)]
        ctx.progress(3, 3)
    return Checked(float(matches.mean()), compile_s, timings, 1000.0 * min(timings) / evaluation, result.int8_simd)


def read_plan(path: Path) -> PartitionPlan:
    if not path.is_file():
        raise CodegenError(f"{path}: no partition plan (the partition stage writes it)")
    return PartitionPlan.from_json(json.loads(path.read_text()), origin=str(path))


def program_inputs(ir: Ir, ir_dir: Path, evaluation) -> np.ndarray | NamedSamples:
    """What the program is run on: the IR's test image, then the evaluation images, each input in integers as the program
    reads it (the IR's HWC image: a rank-2 [N, C] input is [N, 1, 1, C], the same bytes); a network of several inputs:
    {IR name: its images}, sliced together."""
    quantized = IntegerSimulator(ir).quantized(evaluation[:])
    arrays = {}
    for name in ir.network_inputs:
        shape = ir.shape_of_network_input(name)
        arrays[name] = np.concatenate([ir_test_input(ir, ir_dir, name).reshape(1, *shape),
                                       quantized[name].reshape(len(quantized[name]), *shape)])
    return arrays[NETWORK_INPUT] if list(arrays) == [NETWORK_INPUT] else NamedSamples(arrays)


def ir_test_input(ir: Ir, ir_dir: Path, input_name: str = NETWORK_INPUT) -> np.ndarray:
    """The HWC network input `input_name` of the IR's test image, as emit_ir stored it: the input tensor
    (`<layer>_<kind>.npy`) of the first layer that reads it."""
    grid = ir.grid_of_network_input(input_name)
    for layer in ir.layers:
        operands = layer.operands()
        for position, name in enumerate(operands):
            if name == input_name:
                kind = operation_of(layer).input_kind(position, len(operands))
                path = param_file(ir_dir, layer.name, kind)
                if not path.is_file():
                    raise CodegenError(f"{path}: the IR carries no test input (emit_ir writes it)")
                array = np.load(path)
                if array.dtype != grid.dtype:
                    raise CodegenError(f"{path}: a test input of dtype {array.dtype}; {np.dtype(grid.dtype).name} expected")
                return array
    raise CodegenError(f"no layer of the IR reads the network input {input_name}")


def explain_mismatch(ir: Ir, program, program_c: Path, images: np.ndarray, matches: np.ndarray, compiler: tuple[str, ...],
                     work: Path) -> str:
    """Rebuild with -DQT_DUMP_LAYERS, run the first mismatching image and name the first layer
    whose output differs from the simulator's."""
    index = int(np.argmin(matches))
    which = "the IR's test image" if index == 0 else f"evaluation image {index - 1}"
    summary = f"the C network differs from the integer simulator on {int((~matches).sum())} of {len(images)} images"
    binary = compile_program(program_c, work / "network_dump", defines=("QT_DUMP_LAYERS",), compiler=compiler)
    dumped = run_program(binary, program, images[index : index + 1], work / "dump", dump=True)
    expected = IntegerSimulator(ir).run_int8(images[index : index + 1], keep_all=True)
    detail = first_difference(ir, dumped.layers, expected)
    return f"{summary}; on {which}: {detail or 'every layer agrees in the dump build (the optimized build differs)'}"
