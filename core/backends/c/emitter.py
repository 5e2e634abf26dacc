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

A packer `pack(record, params) -> [PackedConstant]` (optional, per operation) lays out the
layer's constants at codegen time for a SIMD path of its emitter: the program defines each as
`static const <type> <symbol>_<kind>[]` inside `#if <condition>` (a preprocessor test of
qt_gemm.h's QT_INT8_SIMD), and the IR's own arrays stay for the portable path (marked
QT_MAYBE_UNUSED: a build that takes the SIMD path does not read them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from core.ir.records import IrLayer

CEmitter = Callable[[IrLayer, str], str]
C_EMITTERS: dict[str, CEmitter] = {}


@dataclass(frozen=True)
class PackedConstant:
    kind: str  # the array is `<symbol>_<kind>`
    values: np.ndarray  # int8 or int32, written flat in C order
    condition: str  # the preprocessor test under which the program defines it


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


def emits(operation: str) -> Callable[[CEmitter], CEmitter]:
    """Decorator: register the C emitter of `operation`."""
    return _registrar(C_EMITTERS, "emitters", operation)


def packs(operation: str) -> Callable[[CPacker], CPacker]:
    """Decorator: register the packer of `operation`'s constants for its emitter's SIMD path."""
    return _registrar(C_PACKERS, "packers", operation)
