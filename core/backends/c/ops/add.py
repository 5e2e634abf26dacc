"""add, of both dialects, as C99 (the contract: core/backends/c/emitter.py): TF2IR's integer model rendered per
element, or TFLite's reference_integer_ops::Add (the arithmetic: runtime/qt_tflite.h)."""

from __future__ import annotations

import math

from core.backends.c.emitter import emits
from core.backends.c.integer_model import element_expression
from core.ir.ops.add.kernel import add_model
from core.ir.ops.add.record import AddLayer
from core.quantize.grid import AffineGrid, Pow2Grid


@emits("add")
def add_emit_c(record: AddLayer, symbol: str) -> str:
    """The record's sum, as its output's grid says (C_ADD)."""
    return C_ADD[type(record.output_grid)](record, symbol)


def _pow2_add_c(record: AddLayer, symbol: str) -> str:
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


def _tflite_add_c(record: AddLayer, symbol: str) -> str:
    """reference_integer_ops::Add per element: each input less its zero point, shifted left, rescaled to
    the common scale; the sum rescaled to the output's, plus its zero point, clamped."""
    first_zero, second_zero = (grid.zero_point for grid in record.input_grids)
    (first_multiplier, second_multiplier), (first_shift, second_shift) = record.input_multipliers, record.input_shifts
    return f"""/* add of {list(record.shape)} (tflite_int8) */
static void {symbol}(const int8_t *restrict in0, const int8_t *restrict in1, int8_t *restrict out)
{{
    long i;
    for (i = 0; i < {math.prod(record.shape)}L; i++) {{
        int64_t a = qt_mbqm(qt_shl64(in0[i] - ({first_zero}), {record.left_shift}), INT64_C({first_multiplier}), {first_shift});
        int64_t b = qt_mbqm(qt_shl64(in1[i] - ({second_zero}), {record.left_shift}), INT64_C({second_multiplier}), {second_shift});
        out[i] = (int8_t)qt_clamp64(qt_mbqm(a + b, INT64_C({record.output_multiplier}), {record.output_shift}) + ({record.output_grid.zero_point}),
                                    {record.output_min}, {record.output_max});
    }}
}}
"""


C_ADD = {Pow2Grid: _pow2_add_c, AffineGrid: _tflite_add_c}  # by the output's grid
