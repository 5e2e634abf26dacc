"""A TF2IR IR as one plain C99 program (seed 004's host code generation, for a target
with no accelerator: every layer runs on the CPU).

`generate_c(ir)` assembles:

  program.c     the constants (each layer's IR params as `static const int8_t
                <symbol>_weight[]` / `<symbol>_bias[]`, C order of the IR's layouts), one
                function per layer (its op's `emit_c`, core/ops/), `run_network` and `main`;
  qt_runtime.h  the shared integer helpers (core/c_runtime/qt_runtime.h, copied verbatim).

`void run_network(const int8_t *input, int8_t **end_points)` runs one image: `input` is
the network input as int8 HWC (QT_INPUT_BYTES bytes, the image already quantized at the
IR's input log2scale, as IntegerSimulator.quantize does); `end_points[k]` points to a
caller-owned buffer of qt_end_point_bytes[k] bytes, which the k-th end-point layer (the
IR's end-point order) writes. Every other layer output lives in one static arena, at
offsets assigned by liveness (first fit; a layer's output never overlaps its inputs).

`main`: `network INPUT OUTPUT [DUMP]`. INPUT holds N images back to back, raw int8 HWC
(N = file size / QT_INPUT_BYTES; any other size is an error). OUTPUT gets, per image, the
end points in order, raw int8 (N * QT_OUTPUT_BYTES bytes). It prints one line,
`images N seconds T`, T the time spent in run_network (CLOCK_MONOTONIC). Built with
-DQT_DUMP_LAYERS it also writes DUMP: per image, every layer's output in layer order
(qt_layer_bytes), so a mismatch can be traced to the first layer that differs.

The text depends on the IR only (same IR -> same bytes). Symbols are `layer_` + the layer
name with every character outside [A-Za-z0-9_] replaced by `_`, made unique by a suffix.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.ir.io import NETWORK_INPUT, Ir
from core.ir.ops import IR_OPS

RUNTIME_HEADER = Path(__file__).resolve().parent / "runtime" / "qt_runtime.h"
PROGRAM_FILE = "program.c"
BINARY_FILE = "network"
CC_COMMAND = ("cc", "-O2", "-std=c99", "-Wall", "-Werror")
ARENA_ALIGN = 64
VALUES_PER_LINE = 32


class CodegenError(RuntimeError):
    """The program could not be generated, built or run; the message says which and why."""


class CompileError(CodegenError):
    """The C compiler refused the program; the message carries its diagnostics."""


@dataclass
class CProgram:
    source: str  # program.c
    headers: dict[str, str]  # the runtime headers it includes: file name -> text
    symbols: dict[str, str]  # layer name -> C symbol
    input_shape: tuple[int, ...]  # one image, HWC
    end_points: list[str]  # layer names, the IR's end-point order
    shapes: dict[str, tuple[int, ...]]  # layer name -> its output's shape (one image)
    constant_bytes: int
    arena_bytes: int
    files: dict[str, bytes] = field(default_factory=dict)  # other artifacts (instruction streams, listings)

    @property
    def input_bytes(self) -> int:
        return math.prod(self.input_shape)

    @property
    def end_point_bytes(self) -> list[int]:
        return [math.prod(self.shapes[name]) for name in self.end_points]

    @property
    def source_bytes(self) -> int:
        return len(self.source.encode()) + sum(len(text.encode()) for text in self.headers.values())

    def write(self, directory: Path) -> Path:
        """program.c, its headers and files into `directory`; returns program.c's path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in self.headers.items():
            (directory / name).write_text(text)
        for name, data in self.files.items():
            (directory / name).write_bytes(data)
        path = directory / PROGRAM_FILE
        path.write_text(self.source)
        return path


# --- shapes ------------------------------------------------------------------------------------


def output_shape(layer: dict[str, Any]) -> tuple[int, ...]:
    """One image's output shape (HWC; reshape: its output_shape)."""
    operation = layer["operation"]
    if operation == "reshape":
        return tuple(int(d) for d in layer["output_shape"])
    if operation == "add":
        size = layer["input_size"]
        return int(size["height"]), int(size["width"]), int(layer["input_channel_num"])
    size = layer["output_size"]
    channels = layer["input_channel_num"] if operation == "resize_bilinear" else layer["output_channel_num"]
    return int(size["height"]), int(size["width"]), int(channels)


def input_shape(layer: dict[str, Any], position: int) -> tuple[int, ...]:
    """One image's shape of the layer's input at `position` (previous_layer order)."""
    operation = layer["operation"]
    if operation == "reshape":
        return tuple(int(d) for d in layer["input_shape"])
    if operation == "concat2":
        size = layer[f"input{position}_size"]
        return int(size["height"]), int(size["width"]), int(layer[f"input{position}_channel_num"])
    size = layer["input_size"]
    return int(size["height"]), int(size["width"]), int(layer["input_channel_num"])


# --- symbols and constants ---------------------------------------------------------------------


def c_symbols(ir: Ir) -> dict[str, str]:
    """layer name -> a unique C identifier derived from it."""
    symbols: dict[str, str] = {}
    taken: set[str] = set()
    for layer in ir.layers:
        base = "layer_" + re.sub(r"[^A-Za-z0-9_]", "_", layer["name"])
        symbol, suffix = base, 2
        while symbol in taken:
            symbol, suffix = f"{base}_{suffix}", suffix + 1
        taken.add(symbol)
        symbols[layer["name"]] = symbol
    return symbols


def c_array(name: str, values: np.ndarray) -> str:
    flat = np.asarray(values).reshape(-1)
    if flat.dtype != np.int8:
        raise CodegenError(f"{name}: constants of dtype {flat.dtype}; the IR's params are int8")
    lines = [",".join(str(int(v)) for v in flat[start : start + VALUES_PER_LINE]) for start in range(0, len(flat), VALUES_PER_LINE)]
    body = ",\n    ".join(lines)
    return f"static const int8_t {name}[{len(flat)}] = {{\n    {body}\n}};\n"


# --- buffers -----------------------------------------------------------------------------------


def plan_buffers(steps: list[tuple[list[str], list[str]]], sizes: dict[str, int], align: int = ARENA_ALIGN) -> tuple[dict[str, int], int]:
    """Offsets in one arena for the buffers `sizes` names, by liveness over `steps` (each the
    buffers it writes and those it reads, in execution order): a buffer lives from its first
    write to its last read, inclusive (so no step writes over its own inputs); first fit,
    deterministic (step order, lowest offset). Buffers not in `sizes` are not placed."""
    last_read: dict[str, int] = {}
    for position, (_, reads) in enumerate(steps):
        for name in reads:
            last_read[name] = position
    live: list[tuple[int, int, str]] = []  # (offset, size, buffer)
    offsets: dict[str, int] = {}
    arena = 0
    for position, (writes, _) in enumerate(steps):
        live = [entry for entry in live if last_read.get(entry[2], -1) >= position]
        for name in writes:
            if name not in sizes or name in offsets:
                continue
            size = -(-sizes[name] // align) * align
            offset = 0
            for start, length, _ in sorted(live):
                if offset + size <= start:
                    break
                offset = max(offset, start + length)
            live.append((offset, size, name))
            offsets[name] = offset
            arena = max(arena, offset + size)
    return offsets, arena


def plan_arena(ir: Ir, shapes: dict[str, tuple[int, ...]], end_points: list[str]) -> tuple[dict[str, int], int]:
    """Offsets in one arena for every layer output that is not an end point (plan_buffers over
    the layers in IR order)."""
    steps = [([layer["name"]], list(layer["previous_layer"])) for layer in ir.layers]
    sizes = {layer["name"]: math.prod(shapes[layer["name"]]) for layer in ir.layers if layer["name"] not in end_points}
    return plan_buffers(steps, sizes)


def layer_c(ir: Ir, layer: dict[str, Any], symbol: str, fields: dict[str, Any] | None = None, note: str = "") -> tuple[str, str, int]:
    """(its constants as C arrays, its C function, the constants' bytes) of one layer run on the
    host: the op's emit_c of `fields` (default: the layer's own)."""
    name = layer["name"]
    op = IR_OPS.get(layer["operation"])
    if op is None or op.emit_c is None:
        raise CodegenError(f"layer {name}: operation {layer['operation']} has no C emitter (IrOp.emit_c)")
    params = sorted(ir.params.get(name, {}).items())
    constants = "".join(c_array(f"{symbol}_{kind}", array) for kind, array in params)
    function = f"/* {name} ({layer['operation']}{note}) */\n" + op.emit_c(fields or layer, symbol)
    return constants, function, sum(int(np.asarray(array).size) for _, array in params)


# --- the program -------------------------------------------------------------------------------


def generate_c(ir: Ir) -> CProgram:
    symbols = c_symbols(ir)
    shapes = {layer["name"]: output_shape(layer) for layer in ir.layers}
    end_points = ir.end_point_layers
    readers_of_input = [(layer, position) for layer in ir.layers for position, name in enumerate(layer["previous_layer"])
                        if name == NETWORK_INPUT]
    if not readers_of_input:
        raise CodegenError("no layer reads the network input")
    in_shapes = {input_shape(layer, position) for layer, position in readers_of_input}
    if len(in_shapes) != 1:
        raise CodegenError(f"the layers reading the network input disagree on its shape: {sorted(in_shapes)}")
    (network_input,) = in_shapes

    constants, functions, constant_bytes = [], [], 0
    for layer in ir.layers:
        layer_constants, function, size = layer_c(ir, layer, symbols[layer["name"]])
        constants.append(layer_constants)
        functions.append(function)
        constant_bytes += size

    offsets, arena = plan_arena(ir, shapes, end_points)

    def buffer(name: str) -> str:
        if name == NETWORK_INPUT:
            return "input"
        if name in end_points:
            return f"end_points[{end_points.index(name)}]"
        return f"qt_arena + {offsets[name]}"

    calls, dump_offset = [], 0
    for layer in ir.layers:
        name = layer["name"]
        arguments = [buffer(source) for source in layer["previous_layer"]] + [buffer(name)]
        calls.append(f"    {symbols[name]}({', '.join(arguments)});\n"
                     f"    QT_DUMP({dump_offset}, {buffer(name)}, {math.prod(shapes[name])});")
        dump_offset += math.prod(shapes[name])
    end_point_bytes = [math.prod(shapes[name]) for name in end_points]
    arena_declaration = (f"static int8_t qt_arena[{arena}]; /* every layer output but the end points, by liveness */\n"
                         if arena else "")
    header = "\n".join([
        "/* Generated by core/codegen_c.py from a TF2IR IR: do not edit.",
        f" * {len(ir.layers)} layers; input {'x'.join(map(str, network_input))} int8 HWC; "
        f"end points: {', '.join(f'{name} {list(shapes[name])}' for name in end_points)}.",
        " * Build: cc -O2 -std=c99 -Wall -Werror -o network program.c  (-DQT_DUMP_LAYERS: also dump every layer)",
        " * Run:   network INPUT OUTPUT [DUMP]  (raw int8: N images in, N x the end points out) */",
    ])
    body = f"""/* ---- constants: the IR's int8 params ({constant_bytes} bytes) ---- */

{"".join(constants)}
/* ---- layers ---- */

{chr(10).join(functions)}
/* ---- the network ---- */

{arena_declaration}"""
    source = program_source(header, [RUNTIME_HEADER.name], math.prod(network_input), end_point_bytes, dump_offset, body,
                            "\n".join(calls))
    return CProgram(source=source, headers={RUNTIME_HEADER.name: RUNTIME_HEADER.read_text()}, symbols=symbols,
                    input_shape=network_input, end_points=end_points, shapes=shapes, constant_bytes=constant_bytes,
                    arena_bytes=arena)


def program_source(header: str, includes: list[str], input_bytes: int, end_point_bytes: list[int], dump_bytes: int, body: str,
                   run_body: str) -> str:
    """A whole program around `body` (constants, functions, buffers) and `run_body` (the
    statements of run_network): the includes, QT_DUMP (in -DQT_DUMP_LAYERS builds, copies a
    layer's output to its slot of the per-image dump; a no-op otherwise) and `main`."""
    include_lines = "\n".join(f'#include "{name}"' for name in includes)
    return f"""{header}
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

{include_lines}

#define QT_INPUT_BYTES {input_bytes}
#define QT_NUM_END_POINTS {len(end_point_bytes)}
#define QT_OUTPUT_BYTES {sum(end_point_bytes)}
#define QT_DUMP_BYTES {max(1, dump_bytes)}

#ifdef QT_DUMP_LAYERS
static int8_t qt_dump_layers[QT_DUMP_BYTES]; /* one image: every layer's output, host layout, IR order */
#define QT_DUMP(offset, data, bytes) memcpy(qt_dump_layers + (offset), (data), (bytes))
#else
#define QT_DUMP(offset, data, bytes) ((void)0)
#endif

{body}
static const long qt_end_point_bytes[QT_NUM_END_POINTS] = {{{", ".join(map(str, end_point_bytes))}}};

void run_network(const int8_t *input, int8_t **end_points);

void run_network(const int8_t *input, int8_t **end_points)
{{
{run_body}
}}

static double qt_seconds(void)
{{
#if defined(CLOCK_MONOTONIC)
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
#else
    return (double)clock() / CLOCKS_PER_SEC;
#endif
}}

int main(int argc, char **argv)
{{
    static int8_t outputs[QT_OUTPUT_BYTES];
    int8_t *end_points[QT_NUM_END_POINTS];
    FILE *in, *out;
    int8_t *images;
    long size, count, image, offset = 0;
    int k;
    double seconds = 0.0;
#ifdef QT_DUMP_LAYERS
    FILE *dump;
#endif
    if (argc < 3) {{
        fprintf(stderr, "usage: %s INPUT OUTPUT [DUMP]\\n", argv[0]);
        return 2;
    }}
    for (k = 0; k < QT_NUM_END_POINTS; k++) {{
        end_points[k] = outputs + offset;
        offset += qt_end_point_bytes[k];
    }}
    in = fopen(argv[1], "rb");
    if (!in || fseek(in, 0, SEEK_END) != 0 || (size = ftell(in)) < 0 || fseek(in, 0, SEEK_SET) != 0) {{
        fprintf(stderr, "%s: cannot read\\n", argv[1]);
        return 1;
    }}
    if (size % QT_INPUT_BYTES != 0) {{
        fprintf(stderr, "%s: %ld bytes, not a whole number of %d-byte images\\n", argv[1], size, QT_INPUT_BYTES);
        return 1;
    }}
    count = size / QT_INPUT_BYTES;
    images = malloc(size > 0 ? (size_t)size : 1);
    if (!images || fread(images, 1, (size_t)size, in) != (size_t)size) {{
        fprintf(stderr, "%s: cannot read %ld bytes\\n", argv[1], size);
        return 1;
    }}
    fclose(in);
    out = fopen(argv[2], "wb");
    if (!out) {{
        fprintf(stderr, "%s: cannot write\\n", argv[2]);
        return 1;
    }}
#ifdef QT_DUMP_LAYERS
    if (argc < 4 || !(dump = fopen(argv[3], "wb"))) {{
        fprintf(stderr, "a QT_DUMP_LAYERS build needs a writable DUMP path\\n");
        return 2;
    }}
#endif
    for (image = 0; image < count; image++) {{
        double start = qt_seconds();
        run_network(images + image * QT_INPUT_BYTES, end_points);
        seconds += qt_seconds() - start;
        if (fwrite(outputs, 1, QT_OUTPUT_BYTES, out) != QT_OUTPUT_BYTES) {{
            fprintf(stderr, "%s: write failed\\n", argv[2]);
            return 1;
        }}
#ifdef QT_DUMP_LAYERS
        if (fwrite(qt_dump_layers, 1, QT_DUMP_BYTES, dump) != QT_DUMP_BYTES) {{
            fprintf(stderr, "%s: write failed\\n", argv[3]);
            return 1;
        }}
#endif
    }}
    if (fclose(out) != 0) {{
        fprintf(stderr, "%s: write failed\\n", argv[2]);
        return 1;
    }}
#ifdef QT_DUMP_LAYERS
    fclose(dump);
#endif
    free(images);
    printf("images %ld seconds %.9f\\n", count, seconds);
    return 0;
}}
"""


# --- build and run -----------------------------------------------------------------------------


def compile_program(program_c: Path, output: Path | None = None, defines: tuple[str, ...] = (),
                    compiler: tuple[str, ...] = CC_COMMAND) -> Path:
    """cc -O2 -std=c99 -Wall -Werror [-D...] -o network program.c, in program.c's directory.
    A refusal raises CompileError with the compiler's diagnostics."""
    program_c = Path(program_c)
    output = Path(output) if output is not None else program_c.parent / BINARY_FILE
    if shutil.which(compiler[0]) is None:
        raise CodegenError(f"no C compiler: {compiler[0]!r} is not on PATH")
    command = [*compiler, *(f"-D{define}" for define in defines), "-o", str(output.resolve()), program_c.name]
    result = subprocess.run(command, cwd=program_c.parent, capture_output=True, text=True)
    if result.returncode != 0:
        diagnostics = (result.stderr or result.stdout).strip()
        raise CompileError(f"{' '.join(command)} failed (exit {result.returncode}):\n{diagnostics}")
    return output


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]  # end-point layer -> [N, *shape] int8
    seconds: float  # inside run_network, all images
    wall_s: float  # the whole process
    layers: dict[str, np.ndarray] | None = None  # with a dump build: layer -> [N, *shape] int8


def run_program(binary: Path, program: CProgram, images: np.ndarray, work_dir: Path, dump: bool = False) -> RunResult:
    """Run the built network on int8 images [N, *input_shape]; the end points as arrays."""
    images = np.ascontiguousarray(images, dtype=np.int8)
    if tuple(images.shape[1:]) != program.input_shape:
        raise CodegenError(f"images of shape {list(images.shape)}; the network takes [N, {', '.join(map(str, program.input_shape))}]")
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    paths = [work_dir / "input.bin", work_dir / "output.bin", work_dir / "layers.bin"]
    paths[0].write_bytes(images.tobytes())
    command = [str(Path(binary).resolve()), *map(str, paths[: 3 if dump else 2])]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise CodegenError(f"{' '.join(command)} exited with {result.returncode}: {(result.stderr or result.stdout).strip()}")
    match = re.search(r"images (\d+) seconds ([0-9.eE+-]+)", result.stdout)
    if match is None or int(match.group(1)) != len(images):
        raise CodegenError(f"{binary}: unexpected report {result.stdout.strip()!r}")
    n = len(images)
    raw = np.frombuffer(paths[1].read_bytes(), dtype=np.int8).reshape(n, -1)
    outputs, start = {}, 0
    for name, size in zip(program.end_points, program.end_point_bytes):
        outputs[name] = raw[:, start : start + size].reshape(n, *program.shapes[name])
        start += size
    layers = None
    if dump:
        raw = np.frombuffer(paths[2].read_bytes(), dtype=np.int8).reshape(n, -1)
        layers, start = {}, 0
        for name, shape in program.shapes.items():
            size = math.prod(shape)
            layers[name] = raw[:, start : start + size].reshape(n, *shape)
            start += size
    return RunResult(outputs, float(match.group(2)), wall, layers)


def first_difference(ir: Ir, c_layers: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> str | None:
    """The first layer (IR order) whose C output differs from the simulator's, described; None if none."""
    for layer in ir.layers:
        name = layer["name"]
        ours, theirs = c_layers[name], np.asarray(expected[name]).reshape(c_layers[name].shape)
        differ = ours != theirs
        if differ.any():
            index = tuple(int(i) for i in np.argwhere(differ)[0])
            return (f"layer {name} ({layer['operation']}): {int(differ.sum())} of {differ.size} bytes differ, first at "
                    f"[image, ...] {list(index)}: C {int(ours[index])}, simulator {int(theirs[index])}")
    return None
