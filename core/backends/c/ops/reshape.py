"""reshape as C99 (the contract: core/backends/c/emitter.py)."""

from __future__ import annotations

import math

import numpy as np

from core.backends.c.emitter import emits
from core.ir.ops.reshape.record import ReshapeLayer


@emits("reshape")
def reshape_emit_c(record: ReshapeLayer, symbol: str) -> str:
    """The image's bytes copied unchanged (`reshape_kernel`: C order in, C order out), its elements' bytes each."""
    count = math.prod(int(d) for d in record.input_shape) * np.dtype(record.integer_dtype).itemsize
    return f"""/* reshape {list(record.input_shape)} -> {list(record.output_shape)} ({record.dialect}): a copy */
static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    memcpy(out, in0, {count});
}}
"""
