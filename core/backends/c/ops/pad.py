"""pad as C99 (the contract: core/backends/c/emitter.py): the image copied row by row into an output filled
with its grid's zero (TF2IR's 0, the tflite_int8 dialect's zero point), a pixel's bytes at a time (int8 or int16)."""

from __future__ import annotations

import numpy as np

from core.backends.c.emitter import emits
from core.ir.ops.pad.record import PadLayer


@emits("pad")
def pad_emit_c(record: PadLayer, symbol: str) -> str:
    height, width = record.input_size.pair()
    out_height, out_width = record.output_size.pair()
    channels, padding, fill = record.input_channel_num, record.padding, record.grid.zero_point
    pixel = channels * np.dtype(record.integer_dtype).itemsize  # a pixel's bytes (an int16 zero point is 0: its bytes are 0)
    return f"""/* pad {height}x{width}x{channels} by {padding.as_list()} with {fill} ({record.dialect}) */
static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int y;
    memset(out, {fill}, {out_height * out_width * pixel});
    for (y = 0; y < {height}; y++)
        memcpy(out + ((y + {padding.top}) * {out_width} + {padding.left}) * {pixel}, in0 + y * {width * pixel}, {width * pixel});
}}
"""
