"""constant as C99 (the contract: core/backends/c/emitter.py): its values copied to each image's output."""

from __future__ import annotations

import math

from core.backends.c.emitter import c_values, emits
from core.ir.ops.constant.record import ConstantLayer


@emits("constant")
def constant_emit_c(record: ConstantLayer, symbol: str) -> str:
    """`constant_kernel` for one image: the input is read for nothing."""
    count, kind = math.prod(record.output_shape), c_values(record).type
    return f"""/* constant: {count} values ({record.dialect}) */
static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    (void)in0;
    memcpy(out, {symbol}_values, {count} * sizeof({kind}));
}}
"""
