"""pad as C99 (the contract: core/backends/c/emitter.py): the image copied row by row into an output filled
with the padding value; TF2IR's pads with 0, the tflite_int8 dialect's (affine_data.py) with its zero point."""

from __future__ import annotations

from core.backends.c.emitter import emits
from core.ir.ops.pad.record import PadLayer


def pad_c(record, symbol: str, fill: int, what: str) -> str:
    """A pad record's (input_size, input_channel_num, output_size, padding) C function, `fill` around the image."""
    height, width = record.input_size.pair()
    out_height, out_width = record.output_size.pair()
    channels, padding = record.input_channel_num, record.padding
    return f"""/* pad {height}x{width}x{channels} by {padding.as_list()} with {what} */
static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int y;
    memset(out, {fill}, {out_height * out_width * channels});
    for (y = 0; y < {height}; y++)
        memcpy(out + ((y + {padding.top}) * {out_width} + {padding.left}) * {channels}, in0 + y * {width * channels}, {width * channels});
}}
"""


@emits("pad")
def pad_emit_c(record: PadLayer, symbol: str) -> str:
    return pad_c(record, symbol, 0, "zeros")
