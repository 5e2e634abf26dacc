"""add, of both dialects, as C99 (the contract: core/backends/c/emitter.py): its dialect's model (core/ir/ops/add/kernel.py)
rendered per element, TF2IR's integer model or TFLite's affine model (the rescale: runtime/qt_tflite.h)."""

from __future__ import annotations

import math

from core.backends.c.emitter import c_function, emits
from core.backends.c.integer_model import affine_expression, element_expression
from core.ir.ops.add.kernel import add_model, tflite_add_model
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
    """`tflite_add_model` (core/ir/ops/add/kernel.py) for one image, element by element in int64."""
    return f"""/* add of {list(record.shape)} (tflite_int8{"" if record.activation_bits == 8 else ", int16"}) */
{c_function(record, symbol, 2)}    long i;
    for (i = 0; i < {math.prod(record.shape)}L; i++) {{
        out[i] = {affine_expression(tflite_add_model, record, ["in0[i]", "in1[i]"])};
    }}
}}
"""


C_ADD = {Pow2Grid: _pow2_add_c, AffineGrid: _tflite_add_c}  # by the output's grid
