"""What the operation tests share: one-op TensorFlow graphs described as IR layers, the
independent float path (TF's op on the real values, then the spec's rounding), and one IR layer
compiled as C and run on a batch."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import assume

from conftest import ir_record
from core.backends.c.build import compile_program, compiler_command, run_program
from core.backends.c.ops import emit_c
from core.backends.c.program import ARENA_ALIGN, RUNTIME_HEADERS, c_symbols
from core.backends.program import generate_c
from core.frontend.graph import Graph
from core.ir.io import validate_ir
from core.ir.layers import group_layers
from core.ir.network import Ir
from core.ir.op import END_POINT, NETWORK_INPUT, IrContext, operation_of
from core.ir.ops import OPS
from core.quantize.schemes import pow2_range
from core.quantize.table import CalibrationTable, TensorEntry

EMITTER_KEYS = ("name", "operation", "previous_layer", "next_layer")


# --- the independent path -------------------------------------------------------------------


def real(values, log2scale: int) -> np.ndarray:
    return np.asarray(values, dtype=np.float64) * 2.0**-log2scale


def quantize(real_values, log2scale: int) -> np.ndarray:
    """FakeQuant on a power-of-two range: round half up at the scale, saturate to int8."""
    return np.clip(np.floor(np.asarray(real_values, dtype=np.float64) * 2.0**log2scale + 0.5), -128, 127).astype(np.int64)


def int8(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.integers(-128, 128, size=shape).astype(np.int8)


def run(layer, fields, inputs, params=None) -> np.ndarray:
    result = OPS[layer.op].kernel(ir_record(layer.op, fields, layer.ir_name, ["input"] * len(inputs)), params or {}, inputs)
    assert result.dtype == np.int8
    return result.astype(np.int64)


# --- one-op graphs --------------------------------------------------------------------------


def op_context(build, input_shape, scales: dict[str, int], **limits):
    """The graph build(x) on a placeholder x:[1, *input_shape]: its layers, and an IrContext whose
    table gives the network input scales["input"] and each layer's output scales[layer name] (or
    scales["*"])."""
    with tf.Graph().as_default() as tf_graph:
        x = tf.compat.v1.placeholder(tf.float32, [1, *input_shape], name="x")
        out = build(x)
    graph = Graph.from_graph_def(tf_graph.as_graph_def(), "x:0", [out.name])
    graph.infer_shapes()
    layer_graph = group_layers(graph)
    tensors = {}
    for tensor in layer_graph.quantized_tensors():
        layer = layer_graph.producer_of(tensor)
        key = "input" if layer is None else layer.name
        if key not in scales and "*" not in scales:
            raise KeyError(f"no scale for layer {key} (or '*') in {sorted(scales)}")
        value = scales[key] if key in scales else scales["*"]  # "*": every layer not named
        tensors[tensor] = TensorEntry("activation", "fixed", 2.0 ** (7 - value), pow2_range(value, 8), log2scale=value)
    context = IrContext(layer_graph, CalibrationTable("fixed", "tf2ir", 8, tensors), **limits)
    return layer_graph, context


def last_layer(layer_graph):
    return layer_graph.layers[-1]


def fields_of(layer_graph, context, layer=None):
    """The layer's IR fields (its record's JSON but for the keys every layer has)."""
    layer = layer or last_layer(layer_graph)
    record = OPS[layer.op].describe(layer, context)
    return {key: value for key, value in record.to_json().items() if key not in EMITTER_KEYS}


# --- one layer: the C against the kernel ------------------------------------------------------


def one_layer_ir(fields: dict, params: dict, inputs: int = 1) -> Ir:
    layer = {"name": "layer.under-test", **fields, "previous_layer": [NETWORK_INPUT] * inputs, "next_layer": [END_POINT]}
    validate_ir([layer], origin="test layer")
    return Ir.from_json([layer], {layer["name"]: params} if params else {})


def c_output(ir: Ir, inputs: list[np.ndarray], work: Path) -> np.ndarray:
    """The layer's C on the batch `inputs`: one-input layers as a whole generated program
    (generate_c), layers of several inputs through a driver calling the emitted function
    directly (a network input feeds one tensor, and these layers need independent ones), from a function of the
    program's and on one arena as run_network calls it: a compiler sees the same object behind every pointer and inlines
    the call (GCC 12.2 at -O2 miscompiled a batch_matmul so, and not on separate arrays)."""
    (layer,) = ir.layers
    if len(inputs) == 1:
        program = generate_c(ir)
        binary = compile_program(program.write(work))
        return run_program(binary, program, inputs[0], work / "run").outputs[layer.name]
    symbol = c_symbols(ir)[layer.name]
    sizes = [x[0].nbytes for x in inputs]  # bytes: a 16x8 layer's values are int16
    expected = operation_of(layer).kernel(layer, ir.params.get(layer.name, {}), [x[:1] for x in inputs])
    out_size = expected[0].nbytes
    offsets = np.cumsum([0, *(-(-size // ARENA_ALIGN) * ARENA_ALIGN for size in (out_size, *sizes))])  # out, in0, in1, ...
    reads = " && ".join(f"fread(arena + {offsets[k + 1]}, 1, {size}, stdin) == {size}" for k, size in enumerate(sizes))
    arguments = ", ".join(f"arena + {offsets[k + 1]}" for k in range(len(sizes)))
    source = f"""#include <stdio.h>
#include "qt_runtime.h"
{emit_c(layer, symbol)}
static int8_t arena[{offsets[-1]}];
void run_layer(void);
void run_layer(void)
{{
    {symbol}({arguments}, arena);
}}
int main(void)
{{
    while ({reads}) {{
        run_layer();
        fwrite(arena, 1, {out_size}, stdout);
    }}
    return 0;
}}
"""
    work.mkdir(parents=True, exist_ok=True)
    for header in RUNTIME_HEADERS:
        (work / header.name).write_text(header.read_text())
    (work / "driver.c").write_text(source)
    binary = compile_program(work / "driver.c", work / "driver")
    feed = b"".join(np.ascontiguousarray(x[n]).tobytes() for n in range(len(inputs[0])) for x in inputs)
    result = subprocess.run([str(binary)], input=feed, capture_output=True, check=True)
    return np.frombuffer(result.stdout, dtype=expected.dtype).reshape(len(inputs[0]), *expected.shape[1:])


def check_layer(fields: dict, params: dict, inputs: list[np.ndarray], work: Path) -> None:
    ir = one_layer_ir(fields, params, len(inputs))
    (layer,) = ir.layers
    try:
        expected = OPS[layer.operation].kernel(layer, params, inputs)
    except OverflowError:  # the kernel refuses an int32 overflow; nothing to compare
        assume(False)
    # the simulator's kernel (the fast one where the operation has one) computes the reference's integers
    np.testing.assert_array_equal(OPS[layer.operation].simulator_kernel(layer, params, inputs), expected)
    ours = c_output(ir, inputs, work)
    assert ours.shape == expected.shape
    differ = np.argwhere(ours != expected)
    assert not len(differ), f"{len(differ)} of {ours.size} bytes differ, first at {differ[0].tolist()}: C {ours[tuple(differ[0])]}, kernel {expected[tuple(differ[0])]}"


def hw(height: int, width: int) -> dict:
    return {"height": height, "width": width}




# --- the SIMD paths of the generated C ----------------------------------------------------------

# qt_gemm.h's QT_INT8_SIMD -> (the /proc/cpuinfo flags a CPU needs to run it, the compiler flags that select it)
SIMD_BUILDS = {
    1: (("avx2", "fma"), ("-O2", "-mavx2", "-mfma")),
    2: (("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni"),
        ("-O2", "-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni")),
}
PORTABLE = ("QT_PORTABLE",)


def cpu_flags() -> set[str]:
    path = Path("/proc/cpuinfo")
    for line in path.read_text().splitlines() if path.is_file() else []:
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def missing_cpu_flags(path: int) -> list[str]:
    """What this CPU lacks to run SIMD path `path` (empty: it runs it)."""
    return sorted(set(SIMD_BUILDS[path][0]) - cpu_flags())


def simd_compiler(path: int) -> tuple[str, ...]:
    return compiler_command(SIMD_BUILDS[path][1])


def run_on_simd_paths(ir: Ir, images: np.ndarray, work: Path) -> dict[str, np.ndarray]:
    """The network's end point from the portable build and from each SIMD path this CPU runs (every
    path is compiled: it must build warning-free anywhere), each build checked to take its path."""
    program = generate_c(ir)
    path_c = program.write(work)
    (end_point,) = program.end_points
    outputs = {}
    for path, build in [("portable", {"defines": PORTABLE}), *((path, {"compiler": simd_compiler(path)}) for path in SIMD_BUILDS)]:
        binary = compile_program(path_c, work / f"network_{path}", **build)
        if path != "portable" and missing_cpu_flags(path):
            continue
        result = run_program(binary, program, images, work / "run")
        assert result.int8_simd == (0 if path == "portable" else path)
        outputs[path] = result.outputs[end_point]
    return outputs


def skip_unless_the_cpu_runs_a_simd_path():
    if missing_cpu_flags(1):
        pytest.skip(f"this CPU lacks {', '.join(missing_cpu_flags(1))}: the SIMD paths were compiled, not run")
