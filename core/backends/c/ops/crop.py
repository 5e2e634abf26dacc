"""crop as C99 (the contract: core/backends/c/emitter.py): the kept rows' kept columns copied."""

from __future__ import annotations

from core.backends.c.emitter import c_function, emits
from core.ir.ops.crop.record import CropLayer


@emits("crop")
def crop_emit_c(record: CropLayer, symbol: str) -> str:
    (height, width), (out_height, out_width) = record.input_size.pair(), record.output_size.pair()
    channels, crop = record.input_channel_num, record.crop
    return f"""/* crop {height}x{width}x{channels} by {crop.as_list()} */
{c_function(record, symbol, 1)}    int y;
    for (y = 0; y < {out_height}; y++)
        memcpy(out + y * {out_width * channels}, in0 + ((y + {crop.top}) * {width} + {crop.left}) * {channels}, {out_width * channels} * sizeof *out);
}}
"""
