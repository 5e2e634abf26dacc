"""lut as C99 (the contract: core/backends/c/emitter.py)."""

from __future__ import annotations

import math

from core.backends.c.emitter import emits
from core.ir.ops.lut.record import TABLE_SIZE, LutLayer


@emits("lut")
def lut_emit_c(record: LutLayer, symbol: str) -> str:
    """`lut_kernel` for one image: out[i] = table[in[i] + 128], the table being the layer's params."""
    count = math.prod(record.shape)
    function = record.function.replace("*/", "* /")  # an IR's free text: never the comment's end
    return f"""/* lut over {count} elements: {function} ({record.dialect}) */
QT_SIMD static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int i;
    for (i = 0; i < {count}; i++) {{
        out[i] = {symbol}_table[in0[i] + {TABLE_SIZE // 2}];
    }}
}}
"""
