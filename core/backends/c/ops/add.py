"""add as C99 (the contract: core/backends/c/emitter.py)."""

from __future__ import annotations

from core.backends.c.emitter import emits
from core.ir.ops.add.record import AddLayer


@emits("add")
def add_emit_c(record: AddLayer, symbol: str) -> str:
    """`add_model` (core/ir/ops/add/kernel.py) for one image, element by element in int64 (the kernel's arithmetic: align
    the finer operand with qt_round_shift64, sum, shift by output_shift_bit -- left exactly,
    right rounded half up --, the activation's clamp, saturate)."""
    count = 1
    for dimension in record.shape_of_output():
        count *= dimension
    coarse = record.coarse_log2scale
    pl_shift, add_shift = record.pl_log2scale - coarse, record.add_log2scale - coarse
    low, high = record.clamp()
    return f"""/* add of {count} elements: pl >> {pl_shift}, add >> {add_shift} (rounded), sum shifted by {record.output_shift_bit}; {record.activation_type} */
QT_SIMD static void {symbol}(const int8_t *restrict in0, const int8_t *restrict in1, int8_t *restrict out)
{{
    int i;
    for (i = 0; i < {count}; i++) {{
        int64_t r = qt_round_shift64(qt_round_shift64(in0[i], {pl_shift}) + qt_round_shift64(in1[i], {add_shift}), {-record.output_shift_bit});
        out[i] = (int8_t)qt_clamp64(r, {low}, {high});
    }}
}}
"""
