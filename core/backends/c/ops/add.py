"""add as C99 (the contract: core/backends/c/emitter.py): its integer model rendered per element."""

from __future__ import annotations

from core.backends.c.emitter import emits
from core.backends.c.integer_model import element_expression
from core.ir.ops.add.kernel import add_model
from core.ir.ops.add.record import AddLayer


@emits("add")
def add_emit_c(record: AddLayer, symbol: str) -> str:
    """`add_model` (core/ir/ops/add/kernel.py) for one image, element by element in int64."""
    count = 1
    for dimension in record.shape_of_output():
        count *= dimension
    return f"""/* add of {count} elements: pl at 2^-{record.pl_log2scale}, add at 2^-{record.add_log2scale}, sum shifted by {record.output_shift_bit}; {record.activation_type} */
QT_SIMD static void {symbol}(const int8_t *restrict in0, const int8_t *restrict in1, int8_t *restrict out)
{{
    int i;
    for (i = 0; i < {count}; i++) {{
        out[i] = {element_expression(add_model, record, ["in0[i]", "in1[i]"])};
    }}
}}
"""
