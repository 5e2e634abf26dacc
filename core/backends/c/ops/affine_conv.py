"""conv and dwconv of the tflite_int8 dialect as C99 (the contract: core/backends/c/emitter.py; the
arithmetic: runtime/qt_tflite.h). Constants: `<symbol>_weight` int8 OHWI (dwconv 1HWC), `_bias`,
`_multiplier`, `_shift` int32 per output channel.

A convolution rounding twice (CONV_2D) also has a SIMD path, the TF2IR conv's (ops/conv.py conv_simd on
qt_gemm.h's microkernels), with seed 004's zero-point folding: the input padded with its zero point (whose
products are then (zero point - zero point) x w = 0, as TFLite skips those taps), the GEMM of the raw int8
values, and `bias - zero point x sum(w)` per output channel folded into the GEMM's offset; the int32 sums
are exact (the IR refuses a layer whose accumulators could leave int32: core/ir/ops/conv/affine_record.py),
then TFLite's requantization in vectors (qt_gemm.h)."""

from __future__ import annotations

import numpy as np

from core.backends.c.emitter import PackedConstant, emits, packs
from core.backends.c.ops.conv import SIMD_A_BIAS, SIMD_BLOCK, SIMD_PATHS, c_geometry, conv_simd, padded_size
from core.ir.ops.conv.affine_record import ConvAffineLayer

_REQUANTIZE = {"double": "qt_mbqm", "single": "qt_mbqm_single"}
SIMD_ANY = "QT_INT8_SIMD"  # the condition of what both SIMD paths read


def simd_applies(record: ConvAffineLayer) -> bool:
    """The GEMM path: a convolution (not depthwise) rounding twice, as qt_gemm.h's TFLite store does."""
    return not record.depthwise and record.rounding == "double"


@emits("conv@tflite_int8")
@emits("dwconv@tflite_int8")
def conv_affine_emit_c(record: ConvAffineLayer, symbol: str) -> str:
    portable = _portable(record, symbol)
    if not simd_applies(record):
        return portable
    g = c_geometry(record)
    hp, wp = padded_size(g)
    g = {**g, "HP": hp, "WP": wp, "K": g["KH"] * g["KW"] * g["CI"], "low": record.output_min, "high": record.output_max}
    simd = conv_simd(symbol, g, pad_value=record.input_zero_point, requantize=f"{symbol}_requant, {record.output_zero_point}, 0")
    return f"""#if QT_INT8_SIMD /* qt_gemm.h's microkernels, the zero point folded into the offsets, TFLite's requantization */
{simd}#else /* portable C99 */
{portable}#endif
"""


@packs("conv@tflite_int8")
def conv_affine_pack_c(record: ConvAffineLayer, params: dict[str, np.ndarray]) -> list[PackedConstant]:
    """For the SIMD path: the weights in qt_gemm.h's blocks of each path ([K][Co] from OHWI, zero past K and
    Co), the offsets (bias - (input zero point + QT_A_BIAS) x the channel's weight sum, wrapped to int32 as the
    vector sums wrap) and the requantization [block][multiplier 16][left shift 16][right shift 16]."""
    if not simd_applies(record):
        return []
    outputs = record.output_channel_num
    weight = np.asarray(params["weight"], np.int64).reshape(outputs, -1).T  # [K][Co]
    k, kp, blocks = weight.shape[0], -(-weight.shape[0] // 4) * 4, -(-outputs // SIMD_BLOCK)
    padded = np.zeros((kp, blocks * SIMD_BLOCK), np.int8)
    padded[:k, :outputs] = weight
    vnni = padded.reshape(kp // 4, 4, blocks, SIMD_BLOCK).transpose(2, 0, 3, 1)  # [block][k-quad][channel][4]
    avx2 = padded.astype(np.int16).reshape(kp // 2, 2, blocks, SIMD_BLOCK).transpose(2, 0, 3, 1)  # [block][k-pair][channel][2]
    bias = np.zeros(blocks * SIMD_BLOCK, np.int64)
    bias[:outputs] = params["bias"] if record.load_bias else 0
    column_sums = padded.astype(np.int64).sum(axis=0)
    constants = [PackedConstant("packed", np.ascontiguousarray(vnni), SIMD_PATHS["vnni"]),
                 PackedConstant("packed", np.ascontiguousarray(avx2), SIMD_PATHS["avx2"])]
    for path, condition in SIMD_PATHS.items():
        offset = bias - (record.input_zero_point + SIMD_A_BIAS[path]) * column_sums
        constants.append(PackedConstant("offset", ((offset + 2**31) % 2**32 - 2**31).astype(np.int32), condition))
    multiplier, shift = (np.zeros(blocks * SIMD_BLOCK, np.int64) for _ in range(2))
    multiplier[:outputs], shift[:outputs] = params["multiplier"], params["shift"]
    requant = np.stack([multiplier, np.maximum(shift, 0), np.maximum(-shift, 0)]).reshape(3, blocks, SIMD_BLOCK).transpose(1, 0, 2)
    constants.append(PackedConstant("requant", np.ascontiguousarray(requant.astype(np.int32)), SIMD_ANY))
    return constants


def _portable(record: ConvAffineLayer, symbol: str) -> str:
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
