"""deconv as C99 (the contract: core/backends/c/emitter.py): the input stuffed with stride - 1 zeros between
neighbouring pixels into a scratch image, then conv's C (conv.py, its SIMD paths included) for the equivalent
stride-1 conv (core/ir/ops/conv/deconv/record.py), whose constants are the layer's own under the conv's names."""

from __future__ import annotations

import numpy as np

from core.backends.c.emitter import PackedConstant, emits, packs
from core.backends.c.ops.conv import conv_emit_c, conv_pack_c
from core.ir.ops.conv.deconv.record import DeconvLayer

CONSTANT_KINDS = ("weight", "bias", "packed", "offset")  # what conv's C reads as <symbol>_<kind>


@emits("deconv")
def deconv_emit_c(record: DeconvLayer, symbol: str) -> str:
    conv, inner = record.equivalent_conv(), f"{symbol}_conv"
    (height, width), (stuffed_height, stuffed_width) = record.input_size.pair(), record.stuffed_size().pair()
    channels, (sh, sw) = record.input_channel_num, record.stride.pair()
    aliases = "\n".join(f"#define {inner}_{kind} {symbol}_{kind}" for kind in CONSTANT_KINDS)
    return f"""/* deconv {height}x{width}x{channels} stride {sh}x{sw}: zeros stuffed between pixels, then its equivalent conv */
{aliases}
{conv_emit_c(conv, inner)}
static int8_t {symbol}_stuffed[{stuffed_height * stuffed_width * channels}];

static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int y, x;
    memset({symbol}_stuffed, 0, sizeof {symbol}_stuffed);
    for (y = 0; y < {height}; y++)
        for (x = 0; x < {width}; x++)
            memcpy({symbol}_stuffed + ((y * {sh}) * {stuffed_width} + x * {sw}) * {channels}, in0 + (y * {width} + x) * {channels}, {channels});
    {inner}({symbol}_stuffed, out);
}}
"""


@packs("deconv")
def deconv_pack_c(record: DeconvLayer, params: dict[str, np.ndarray]) -> list[PackedConstant]:
    return conv_pack_c(record.equivalent_conv(), params)
