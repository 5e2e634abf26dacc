"""The C backend's registry: how each IR operation is written as C99.

An emitter `emit(record, symbol) -> str` returns the C of one layer (its typed IR record,
core/ir/records.py), under this contract:
  - it defines `static void <symbol>(const int8_t *in0, [const int8_t *in1,] int8_t *out)`,
    one pointer per operand in the operation's order (IrLayer.operands: add pl, add; concat2 input0, input1): one
    image, HWC (int8, row-major), computing exactly what the operation's kernel (core/ir/ops/)
    computes for that image, bit for bit. `out` never aliases an input.
  - shapes, shifts and clamps are baked in as literals: the text depends on the record and
    `symbol` only (same record -> same text).
  - constants are read from `<symbol>_weight` / `<symbol>_bias`, which the program defines as
    `static const int8_t` arrays holding the IR's params of that kind flattened in C order of
    the IR's layouts (conv weight HWCiCo, dwconv weight HWC, bias C); it references only the
    kinds the layer has (no bias without load_bias).
  - any other file-scope name it defines (caches, scratch, helpers) starts with `<symbol>_`;
    it may use the helpers of runtime/qt_runtime.h (qt_* names, QT_* macros), which the
    program includes before it, and nothing else beyond <stdint.h> and <string.h>.
  - it compiles warning-free under `cc -std=c99 -Wall -Werror` and relies on no
    implementation-defined behaviour (e.g. right shifts of negative values; see the runtime).
  - a function marked QT_SIMD (compiled once per instruction set) keeps no array on its
    stack: GCC 12 miscompiles such leaf functions for AVX-512 (see qt_runtime.h).
Every IR operation has an emitter (tests/test_structure.py): the host can run any layer.
A layer of TFLite's 16x8 mode (`activation_bits` 16) holds int16 values: its pointers are still the program's bytes,
read as int16_t (`c_function` opens such a function; `c_values` gives the element type, an accumulator wide enough and
the saturating store), as TFLite Micro's kernels read their int16 tensors in its byte arena.

A packer `pack(record, params) -> [PackedConstant]` (optional, per operation) lays out the
layer's constants at codegen time for a SIMD path of its emitter: the program defines each as
`static const <type> <symbol>_<kind>[]` inside `#if <condition>` (a preprocessor test of
qt_gemm.h's QT_INT8_SIMD), and the IR's own arrays stay for the portable path (marked
QT_MAYBE_UNUSED: a build that takes the SIMD path does not read them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, TypeVar

import numpy as np

from core.ir.records import IrLayer

CEmitter = Callable[[IrLayer, str], str]
C_EMITTERS: dict[str, CEmitter] = {}


@dataclass(frozen=True)
class PackedConstant:
    kind: str  # the array is `<symbol>_<kind>`
    values: np.ndarray  # int8 or int32, written flat in C order
    condition: str  # the preprocessor test under which the program defines it


@dataclass(frozen=True)
class CValues:
    """How a layer's activations are held in C: their element type, an accumulator for sums of their products with int8
    weights, the saturating store of an int64."""

    type: str
    accumulator: str
    saturate: str


C_VALUES = {8: CValues("int8_t", "int32_t", "qt_sat8"), 16: CValues("int16_t", "int64_t", "qt_sat16")}  # by activation_bits


def c_values(record: IrLayer) -> CValues:
    return C_VALUES[record.activation_bits]


def c_function(record: IrLayer, symbol: str, inputs: int, prefix: str = "static") -> str:
    """The head and opening brace of the contract's function, `in0`.. and `out` of the layer's element type (a 16-bit
    layer's byte pointers read as int16_t: the arena's offsets are aligned)."""
    names = [f"in{k}" for k in range(inputs)]
    if record.activation_bits == 8:
        parameters = [*(f"const int8_t *restrict {name}" for name in names), "int8_t *restrict out"]
        return f"{prefix} void {symbol}({', '.join(parameters)})\n{{\n"
    kind = c_values(record).type
    parameters = [*(f"const int8_t *restrict {name}_bytes" for name in names), "int8_t *restrict out_bytes"]
    views = [*(f"    const {kind} *restrict {name} = (const {kind} *)(const void *){name}_bytes;\n" for name in names),
             f"    {kind} *restrict out = ({kind} *)(void *)out_bytes;\n"]
    return f"{prefix} void {symbol}({', '.join(parameters)})\n{{\n{''.join(views)}"


CPacker = Callable[[IrLayer, dict[str, np.ndarray]], list[PackedConstant]]
C_PACKERS: dict[str, CPacker] = {}


class CodegenError(RuntimeError):
    """The program could not be generated, built or run; the message says which and why."""


def _registrar(table: dict, what: str, operation: str) -> Callable:
    def register(function):
        if operation in table:
            raise ValueError(f"two C {what} for {operation!r}")
        table[operation] = function
        return function

    return register


# an emitter or packer takes its own operation's record (an AddLayer), which the tables keyed by operation hand it
Emitter = TypeVar("Emitter", bound=Callable[..., str])
Packer = TypeVar("Packer", bound=Callable[..., list[PackedConstant]])


def emits(operation: str) -> Callable[[Emitter], Emitter]:
    """Decorator: register the C emitter of `operation`."""
    return _registrar(C_EMITTERS, "emitters", operation)


def packs(operation: str) -> Callable[[Packer], Packer]:
    """Decorator: register the packer of `operation`'s constants for its emitter's SIMD path."""
    return _registrar(C_PACKERS, "packers", operation)
