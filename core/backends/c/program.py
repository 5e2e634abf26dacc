"""The pieces of a generated C99 program: its C symbols, constants as arrays, host layer
functions (each operation's emitter, core/backends/c/ops/), the activation arena planned by
liveness, and the text around them (runtime/qt_program.h first, runtime/qt_main.h last).

Symbols are `layer_` + the layer name with every character outside [A-Za-z0-9_] replaced by
`_`, made unique by a suffix. The text depends on the IR only (same IR -> same bytes).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.backends.c.emitter import CodegenError
from core.backends.c.ops import emit_c, pack_c
from core.ir.network import Ir
from core.ir.records import IrLayer

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
RUNTIME_HEADER = RUNTIME_DIR / "qt_runtime.h"
GEMM_HEADER = RUNTIME_DIR / "qt_gemm.h"  # included by qt_runtime.h
TFLITE_HEADER = RUNTIME_DIR / "qt_tflite.h"  # included by qt_runtime.h: TFLite's int8 arithmetic
RUNTIME_HEADERS = (RUNTIME_HEADER, GEMM_HEADER, TFLITE_HEADER)  # qt_runtime.h and what it includes
PROGRAM_HEADER = RUNTIME_DIR / "qt_program.h"
MAIN_HEADER = RUNTIME_DIR / "qt_main.h"
DATA_FILES = ("core/backends/c/runtime",)  # the headers every program includes
PROGRAM_FILE = "program.c"
ARENA_ALIGN = 64
VALUES_PER_LINE = 32
# a static array the program writes: `static [QT_* ]<type> <name>[<count>];` (constants are `static const`)
STATIC_BUFFER = re.compile(r"^static (?:QT_[A-Z_]+ )?(int8_t|int16_t|int32_t|int64_t|float) \w+\[(\d+)\];", re.M)


def image_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A vector of C values (a Flatten's, a rank-2 model input's) is the 1 x 1 x C image a dense layer reads: the same bytes."""
    return (1, 1, *shape) if len(shape) == 1 else tuple(shape)


@dataclass
class CProgram:
    source: str  # program.c
    headers: dict[str, str]  # the runtime headers it includes: file name -> text
    symbols: dict[str, str]  # layer name -> C symbol
    inputs: dict[str, tuple[int, ...]]  # each network input's IR name -> one image's shape (HWC), in the order the input holds them
    end_points: list[str]  # layer names, the IR's end-point order
    shapes: dict[str, tuple[int, ...]]  # layer name -> its output's shape (one image)
    constant_bytes: int
    arena_bytes: int
    files: dict[str, bytes] = field(default_factory=dict)  # other artifacts (instruction streams, listings)
    # tensor (a layer's name, or a network input's) -> the NumPy type of its integers, where not int8 (TFLite's 16x8 mode)
    dtypes: dict[str, type] = field(default_factory=dict)

    def dtype_of(self, tensor: str) -> np.dtype:
        return np.dtype(self.dtypes.get(tensor, np.int8))

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The network's one input's shape (one image)."""
        if len(self.inputs) != 1:
            raise CodegenError(f"the program has {len(self.inputs)} inputs ({', '.join(self.inputs)}); name the one meant")
        return next(iter(self.inputs.values()))

    @property
    def input_bytes(self) -> int:
        return sum(math.prod(shape) * self.dtype_of(name).itemsize for name, shape in self.inputs.items())

    @property
    def end_point_bytes(self) -> list[int]:
        return [math.prod(self.shapes[name]) * self.dtype_of(name).itemsize for name in self.end_points]

    @property
    def scratch_bytes(self) -> int:
        """The layers' own static RAM beside the arena (a convolution's input padded with its zero point, its weights
        widened to int16, its row of sums): every array the program text declares static and not const, the arena's
        aside; of a layer's SIMD and portable paths a build keeps one, so a build needs at most this."""
        sizes = {"int8_t": 1, "int16_t": 2, "int32_t": 4, "int64_t": 8, "float": 4}
        return sum(sizes[kind] * int(count) for kind, count in STATIC_BUFFER.findall(self.source)) - self.arena_bytes

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


def runtime_headers(*extra: Path) -> dict[str, str]:
    """File name -> text of the headers a program includes (the C runtime's, then `extra`)."""
    return {path.name: path.read_text() for path in (PROGRAM_HEADER, *RUNTIME_HEADERS, *extra, MAIN_HEADER)}


def c_symbols(ir: Ir) -> dict[str, str]:
    """layer name -> a unique C identifier derived from it. An emitter names its helpers `<symbol>_<what>`
    (core/backends/c/emitter.py), so no symbol may begin with another's followed by `_` (a layer `conv`'s
    `layer_conv_padded` buffer against a layer named `conv_padded`): such a symbol takes its layer's position
    instead of the plain prefix, `layer<position>_...`, which no other symbol begins with."""
    symbols: dict[str, str] = {}
    taken: set[str] = set()
    for layer in ir.layers:
        base = "layer_" + re.sub(r"[^A-Za-z0-9_]", "_", layer.name)
        symbol, suffix = base, 2
        while symbol in taken:
            symbol, suffix = f"{base}_{suffix}", suffix + 1
        taken.add(symbol)
        symbols[layer.name] = symbol
    for position, (name, symbol) in enumerate(list(symbols.items())):
        if any(symbol.startswith(other + "_") for other in taken if other != symbol):
            symbols[name] = f"layer{position}_{symbol[len('layer_'):]}"
    return symbols


def c_array(name: str, values: np.ndarray, maybe_unused: bool = False) -> str:
    """Constants as a C array: int8 (the IR's), float32 (a float layer's) as exact hexadecimal
    literals, int16 / int32 (a packer's), int64 (16x8 biases). `maybe_unused`: a build may not read it (QT_MAYBE_UNUSED)."""
    flat = np.asarray(values).reshape(-1)
    storage = "static const QT_MAYBE_UNUSED" if maybe_unused else "static const"
    if flat.dtype == np.float32:
        return _c_initialized(f"{storage} float {name}", [f"{float(v).hex()}f" for v in flat])
    if flat.dtype == np.int64:  # beyond int32, a literal needs its type
        texts = [text if abs(value) <= 2**31 - 1 else f"INT64_C({text})" for value, text in zip(flat.tolist(), decimal_texts(flat))]
        return _c_initialized(f"{storage} int64_t {name}", texts)
    if flat.dtype not in (np.int8, np.int16, np.int32):
        raise CodegenError(f"{name}: constants of dtype {flat.dtype}; expected int8 (the IR's params), float32 (a float "
                           f"layer's), int16 / int32 (a SIMD packing's) or int64 (a 16x8 layer's biases)")
    return _c_initialized(f"{storage} {flat.dtype}_t {name}", decimal_texts(flat))


def decimal_texts(flat: np.ndarray) -> list[str]:
    """Each signed integer of `flat` as its decimal text, as str() writes it: 8- and 16-bit values by table
    lookup (a network's constants are millions of them; str() per numpy value took 0.5 s of codegen)."""
    if flat.dtype.itemsize <= 2:
        return _decimal_table(flat.dtype.itemsize)[flat.astype(np.intp) + 2 ** (8 * flat.dtype.itemsize - 1)].tolist()
    return list(map(str, flat.tolist()))


@functools.cache
def _decimal_table(itemsize: int) -> np.ndarray:
    """The decimal texts of every signed integer of `itemsize` bytes, from the smallest up."""
    half = 2 ** (8 * itemsize - 1)
    return np.array([str(value) for value in range(-half, half)], dtype=object)


def c_bytes(name: str, data: bytes) -> str:
    return _c_initialized(f"static const uint8_t {name}", [str(b) for b in data])


def _c_initialized(declaration: str, values: list[str]) -> str:
    lines = [",".join(values[start : start + VALUES_PER_LINE]) for start in range(0, len(values), VALUES_PER_LINE)]
    body = ",\n    ".join(lines)
    return f"{declaration}[{len(values)}] = {{\n    {body}\n}};\n"


def plan_buffers(steps: list[tuple[list[str], list[str]]], sizes: dict[str, int], align: int = ARENA_ALIGN) -> tuple[dict[str, int], int]:
    """Offsets in one arena for the buffers `sizes` names, by liveness over `steps` (each the buffers it writes and
    those it reads, in execution order): a buffer lives from its first write to its last read, inclusive (so no step
    writes over its own inputs). Placed as TensorFlow Lite Micro's GreedyMemoryPlanner places them: largest first (ties:
    the earlier first written, then by name), each at the lowest offset clear of every placed buffer alive at the same
    time; deterministic. Buffers not in `sizes` are not placed."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for position, (writes, reads) in enumerate(steps):
        for name in writes:
            first.setdefault(name, position)
        for name in reads:
            last[name] = position
    lifetimes = {name: (first[name], max(first[name], last.get(name, first[name]))) for name in sizes if name in first}
    aligned = {name: -(-sizes[name] // align) * align for name in lifetimes}
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, first step, last step)
    offsets: dict[str, int] = {}
    for name in sorted(lifetimes, key=lambda name: (-aligned[name], lifetimes[name][0], name)):
        start, end = lifetimes[name]
        offset = 0
        for other_offset, other_size, other_start, other_end in sorted(placed):
            if other_start > end or start > other_end:
                continue  # not alive at the same time
            if offset + aligned[name] <= other_offset:
                break
            offset = max(offset, other_offset + other_size)
        placed.append((offset, aligned[name], start, end))
        offsets[name] = offset
    return offsets, max((offset + size for offset, size, _, _ in placed), default=0)


def layer_c(ir: Ir, record: IrLayer, symbol: str, note: str = "") -> tuple[str, str, int]:
    """(its constants as C arrays, its C function, the constants' bytes) of one layer run on the
    host, as `record` describes it (the IR's own, or a variant such as one on packed data)."""
    params = sorted(ir.params.get(record.name, {}).items())
    packed = pack_c(record, dict(params))
    constants = "".join(c_array(f"{symbol}_{kind}", array, maybe_unused=bool(packed)) for kind, array in params)
    for constant in packed or ():
        constants += f"#if {constant.condition}\n{c_array(f'{symbol}_{constant.kind}', constant.values)}#endif\n"
    function = f"/* {record.name} ({record.operation}{note}) */\n" + emit_c(record, symbol)
    return constants, function, sum(int(np.asarray(array).size) for _, array in params)


def program_text(header: str, input_bytes: int, end_point_bytes: list[int], dump_bytes: int, defines: dict[str, int],
                 includes: list[str], body: str, run_body: str) -> str:
    """A whole program: `header` (a comment), the sizes qt_program.h and qt_main.h need and any
    other `defines`, the runtime headers and `includes`, `body` (constants, functions, buffers),
    run_network with `run_body`, and the driver (qt_main.h)."""
    sizes = {"QT_INPUT_BYTES": input_bytes, "QT_NUM_END_POINTS": len(end_point_bytes),
             "QT_OUTPUT_BYTES": sum(end_point_bytes), "QT_DUMP_BYTES": max(1, dump_bytes)}
    define_lines = "\n".join(f"#define {name} {value}" for name, value in {**sizes, **defines}.items())
    include_lines = "\n".join(f'#include "{name}"' for name in [PROGRAM_HEADER.name, RUNTIME_HEADER.name, *includes])
    return f"""{header}
{define_lines}
{include_lines}

{body}
static const long qt_end_point_bytes[QT_NUM_END_POINTS] = {{{", ".join(map(str, end_point_bytes))}}};

void run_network(const int8_t *input, int8_t **end_points)
{{
{run_body}
}}

#include "{MAIN_HEADER.name}"
"""
