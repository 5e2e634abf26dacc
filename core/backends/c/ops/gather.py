"""gather as C99 (the contract: core/backends/c/emitter.py): each int32 id's row of the table copied."""

from __future__ import annotations

import math

from core.backends.c.emitter import c_values, emits
from core.ir.ops.gather.record import GatherLayer


@emits("gather")
def gather_emit_c(record: GatherLayer, symbol: str) -> str:
    """`gather_kernel` for one sample. The ids were checked against the vocabulary before the network ran (IndexGrid); an id
    outside it reads row 0 here, so that no input makes the program read outside its table."""
    count, depth, kind = math.prod(record.input_shape), record.depth, c_values(record).type
    return f"""/* gather: {count} int32 ids, each its row of {depth} of a {record.vocabulary}-row table ({record.dialect}) */
static void {symbol}(const int8_t *restrict in0_bytes, int8_t *restrict out_bytes)
{{
    const int32_t *restrict ids = (const int32_t *)(const void *)in0_bytes;
    {kind} *restrict out = ({kind} *)(void *)out_bytes;
    int i, k;
    for (i = 0; i < {count}; i++) {{
        const int32_t id = ids[i] >= 0 && ids[i] < {record.vocabulary} ? ids[i] : 0;
        for (k = 0; k < {depth}; k++) {{
            out[i * {depth} + k] = {symbol}_table[id * {depth} + k];
        }}
    }}
}}
"""
