"""add, of both dialects, as C99 (the contract: core/backends/c/emitter.py): the record's arithmetic
(core/ir/ops/add/kernel.py: add_arithmetic with its requantization) rendered per element in int64 (the rescales:
runtime/qt_runtime.h's qt_round_shift64, runtime/qt_tflite.h's qt_mbqm)."""

from __future__ import annotations

import math

from core.backends.c.emitter import c_function, emits
from core.backends.c.integer_model import record_expression
from core.ir.ops.add.kernel import record_add
from core.ir.ops.add.record import AddLayer


@emits("add")
def add_emit_c(record: AddLayer, symbol: str) -> str:
    """The record's sum for one image, element by element."""
    return f"""/* add of {list(record.shape_of_output())} ({record.dialect}, {record.activation_bits}-bit) */
{c_function(record, symbol, 2)}    long i;
    for (i = 0; i < {math.prod(record.shape_of_output())}L; i++) {{
        out[i] = {record_expression(record_add, record, ["in0[i]", "in1[i]"])};
    }}
}}
"""
