"""concat of the tflite_int8 dialect as C99 (the contract: core/backends/c/emitter.py): moves of bytes."""

from __future__ import annotations

import math

from core.backends.c.emitter import emits
from core.ir.ops.concat.affine_record import ConcatAffineLayer


@emits("concat@tflite_int8")
def concat_affine_emit_c(record: ConcatAffineLayer, symbol: str) -> str:
    """In C order the output is `outer` blocks (the product of the dimensions before the axis), each the
    inputs' next blocks in order, copied unchanged (every input is quantized as the output)."""
    outer = math.prod(record.shape[: record.axis])
    blocks = [math.prod(shape[record.axis :]) for shape in record.input_shapes]
    pointers = ", ".join(f"const int8_t *restrict in{k}" for k in range(len(blocks)))
    copies, offset = [], 0
    for k, block in enumerate(blocks):
        copies.append(f"        memcpy(o + {offset}, in{k} + (long)b * {block}, {block});")
        offset += block
    return f"""/* concat along axis {record.axis} of {[list(shape) for shape in record.input_shapes]} (tflite_int8) */
static void {symbol}({pointers}, int8_t *restrict out)
{{
    long b;
    for (b = 0; b < {outer}; b++) {{
        int8_t *o = out + b * {offset};
{chr(10).join(copies)}
    }}
}}
"""
