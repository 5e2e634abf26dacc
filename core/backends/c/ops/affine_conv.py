"""conv and dwconv of the tflite_int8 dialect as C99 (the contract: core/backends/c/emitter.py; the
arithmetic: runtime/qt_tflite.h). Constants: `<symbol>_weight` int8 OHWI (dwconv 1HWC), `_bias`,
`_multiplier`, `_shift` int32 per output channel."""

from __future__ import annotations

from core.backends.c.emitter import emits
from core.ir.ops.conv.affine_record import ConvAffineLayer

_REQUANTIZE = {"double": "qt_mbqm", "single": "qt_mbqm_single"}


@emits("conv@tflite_int8")
@emits("dwconv@tflite_int8")
def conv_affine_emit_c(record: ConvAffineLayer, symbol: str) -> str:
    """`conv_affine_kernel` for one image: per output pixel and channel the int64 sum of weight x (input -
    input zero point) over the taps inside the image (the padding skipped, as TFLite's loops skip it), the
    bias, TFLite's requantization of the record's rounding, the output zero point, the clamp."""
    height, width = record.input_size.pair()
    out_height, out_width = record.output_size.pair()
    kernel_h, kernel_w = record.kernel_size.pair()
    stride_h, stride_w = record.stride.pair()
    dilation_h, dilation_w = record.dilations.pair()
    channels, outputs = record.input_channel_num, record.output_channel_num
    if record.depthwise:
        taps = f"""acc += (int64_t)(x[o / {outputs // channels}] - ({record.input_zero_point})) * {symbol}_weight[(ky * {kernel_w} + kx) * {outputs} + o];"""
    else:
        taps = f"""const int8_t *w = {symbol}_weight + ((o * {kernel_h} + ky) * {kernel_w} + kx) * {channels};
                        int c;
                        for (c = 0; c < {channels}; c++)
                            acc += (int64_t)(x[c] - ({record.input_zero_point})) * w[c];"""
    bias = f"acc += {symbol}_bias[o];" if record.load_bias else "/* no bias */"
    return f"""/* {record.label()} {height}x{width}x{channels} -> {out_height}x{out_width}x{outputs} (tflite_int8, {record.rounding} rounding) */
static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int oy, ox, o, ky, kx;
    for (oy = 0; oy < {out_height}; oy++)
        for (ox = 0; ox < {out_width}; ox++)
            for (o = 0; o < {outputs}; o++) {{
                int64_t acc = 0;
                for (ky = 0; ky < {kernel_h}; ky++) {{
                    int iy = oy * {stride_h} - {record.padding.top} + ky * {dilation_h};
                    if (iy < 0 || iy >= {height})
                        continue;
                    for (kx = 0; kx < {kernel_w}; kx++) {{
                        int ix = ox * {stride_w} - {record.padding.left} + kx * {dilation_w};
                        const int8_t *x;
                        if (ix < 0 || ix >= {width})
                            continue;
                        x = in0 + (iy * {width} + ix) * {channels};
                        {taps}
                    }}
                }}
                {bias}
                out[(oy * {out_width} + ox) * {outputs} + o] = (int8_t)qt_clamp64(
                    {_REQUANTIZE[record.rounding]}(acc, {symbol}_multiplier[o], {symbol}_shift[o]) + ({record.output_zero_point}),
                    {record.output_min}, {record.output_max});
            }}
}}
"""
