"""conv and dwconv as C99 (the contract: core/backends/c/emitter.py), one emitter of both dialects by the record's
requantization (C_CONV): TF2IR's shifts (ops/conv.py), or TFLite's per-channel multipliers here (the arithmetic:
runtime/qt_tflite.h; constants `<symbol>_weight` int8 OHWI, dwconv 1HWC, `_bias`, `_multiplier`, `_shift` int32 per
output channel).

A convolution rounding twice (CONV_2D) also has a SIMD path, the TF2IR conv's (ops/conv.py conv_simd on
qt_gemm.h's microkernels), with seed 004's zero-point folding: the input padded with its zero point (whose
products are then (zero point - zero point) x w = 0, as TFLite skips those taps), the GEMM of the raw int8
values, and `bias - zero point x sum(w)` per output channel folded into the GEMM's offset; the int32 sums
are exact (the IR refuses a layer whose accumulators could leave int32: core/ir/ops/conv/tflite.py),
then TFLite's requantization in vectors (qt_gemm.h)."""

from __future__ import annotations

import numpy as np

from core.backends.c.emitter import PackedConstant, c_function, c_values, emits, packs
from core.backends.c.geometry import Clamp, WindowGeometry
from core.backends.c.ops.conv import SIMD_A_BIAS, SIMD_BLOCK, SIMD_PATHS, conv_emit_c, conv_pack_c, conv_simd, dwconv_emit_c
from core.ir.ops.conv.record import ChannelRequantization, ConvLayer, ShiftRequantization, by_requantization

_REQUANTIZE = {"double": "qt_mbqm", "single": "qt_mbqm_single", "reduced": "qt_mbqm_reduced"}
SIMD_ANY = "QT_INT8_SIMD"  # the condition of what both SIMD paths read


def simd_applies(record: ConvLayer) -> bool:
    """The GEMM path: a convolution (not depthwise) of int8 values rounding twice, as qt_gemm.h's TFLite store does."""
    return not record.depthwise and record.rounding == "double" and record.activation_bits == 8


def conv_affine_emit_c(record: ConvLayer, symbol: str) -> str:
    portable = _portable(record, symbol)
    if not simd_applies(record):
        return portable
    geometry = WindowGeometry.of(record)
    clamp = Clamp(0, record.output_min, record.output_max)  # no shift: TFLite's requantization is `requantize`'s
    simd = conv_simd(symbol, geometry, clamp, pad_value=record.input_grid.zero_point,
                     requantize=f"{symbol}_requant, {record.output_grid.zero_point}, 0")
    return f"""#if QT_INT8_SIMD /* qt_gemm.h's microkernels, the zero point folded into the offsets, TFLite's requantization */
{simd}#else /* portable C99 */
{portable}#endif
"""


def conv_affine_pack_c(record: ConvLayer, params: dict[str, np.ndarray]) -> list[PackedConstant]:
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
        offset = bias - (record.input_grid.zero_point + SIMD_A_BIAS[path]) * column_sums
        constants.append(PackedConstant("offset", ((offset + 2**31) % 2**32 - 2**31).astype(np.int32), condition))
    multiplier, shift = (np.zeros(blocks * SIMD_BLOCK, np.int64) for _ in range(2))
    multiplier[:outputs], shift[:outputs] = params["multiplier"], params["shift"]
    requant = np.stack([multiplier, np.maximum(shift, 0), np.maximum(-shift, 0)]).reshape(3, blocks, SIMD_BLOCK).transpose(1, 0, 2)
    constants.append(PackedConstant("requant", np.ascontiguousarray(requant.astype(np.int32)), SIMD_ANY))
    return constants


def _portable(record: ConvLayer, symbol: str) -> str:
    """`conv_affine_kernel` for one image in plain C99 that compilers vectorize: the input copied into a buffer
    padded with its zero point (those taps then add (zero point - zero point) x w = 0, as TFLite skips them),
    per output pixel a row of int32 sums over the output channels (the weights widened to int16 as [tap][channel]
    at the first call), less the zero point x each channel's weight sum (seed 004's folding; the int32 sums
    cannot overflow: the IR bounds them), the bias, TFLite's requantization of the record's rounding, the
    output zero point, the clamp. A 16x8 layer's values are int16 and its sums int64 (`c_values`)."""
    geometry = WindowGeometry.of(record)
    values = c_values(record)
    hp, wp = geometry.padded_height, geometry.padded_width
    channels, outputs, s = geometry.in_channels, geometry.out_channels, symbol
    reduction, weight_at, products = _portable_taps(record, s, geometry)
    bias = f"{s}_bias[o]" if record.load_bias else "0"
    row_bytes = "" if values.type == "int8_t" else " * sizeof(int16_t)"
    return f"""/* {record.label()} {geometry.height}x{geometry.width}x{channels} -> {geometry.out_height}x{geometry.out_width}x{outputs} (tflite_int8, {record.rounding} rounding) */
static {values.type} {s}_padded[{hp * wp * channels}]; /* the input, padded with its zero point to {hp}x{wp} */
static int16_t {s}_w16[{reduction * outputs}]; /* the weights as [tap][channel] */
static {values.accumulator} {s}_zero_sum[{outputs}]; /* input zero point x the channel's weight sum */
static {values.accumulator} {s}_acc[{outputs}];
static int {s}_ready;

static void {s}_init(void)
{{
    int o, k;
    memset({s}_padded, {record.input_grid.zero_point}, sizeof {s}_padded);
    for (o = 0; o < {outputs}; o++) {{
        int32_t total = 0;
        for (k = 0; k < {reduction}; k++) {{
            {s}_w16[k * {outputs} + o] = {weight_at};
            total += {weight_at};
        }}
        {s}_zero_sum[o] = ({record.input_grid.zero_point}) * total;
    }}
    {s}_ready = 1;
}}

{c_function(record, s, 1)}    {values.accumulator} *acc = {s}_acc;
    int oy, ox, o, ky, kx, c;
    if (!{s}_ready)
        {s}_init();
    for (oy = 0; oy < {geometry.height}; oy++)
        memcpy({s}_padded + ((oy + {geometry.pad_top}) * {wp} + {geometry.pad_left}) * {channels}, in0 + oy * {geometry.width * channels}, {geometry.width * channels}{row_bytes});
    for (oy = 0; oy < {geometry.out_height}; oy++)
        for (ox = 0; ox < {geometry.out_width}; ox++) {{
            {values.type} *y = out + (oy * {geometry.out_width} + ox) * {outputs};
            for (o = 0; o < {outputs}; o++)
                acc[o] = 0;
            for (ky = 0; ky < {geometry.kernel_h}; ky++)
                for (kx = 0; kx < {geometry.kernel_w}; kx++) {{
                const {values.type} *x = {s}_padded + ((oy * {geometry.stride_h} + ky * {geometry.dilation_h}) * {wp} + ox * {geometry.stride_w} + kx * {geometry.dilation_w}) * {channels};
                {products}
            }}
            for (o = 0; o < {outputs}; o++)
                y[o] = ({values.type})qt_clamp64({_REQUANTIZE[record.rounding]}((int64_t)acc[o] - {s}_zero_sum[o] + {bias}, {s}_multiplier[o],
                                          {s}_shift[o]) + ({record.output_grid.zero_point}), {record.output_min}, {record.output_max});
            (void)c;
        }}
}}
"""


def _portable_taps(record: ConvLayer, s: str, geometry: WindowGeometry) -> tuple[int, str, str]:
    """(the products per output channel, the C of weight k of channel o in the IR's layout, the C adding one
    tap's products into the row of sums `acc`)."""
    channels, outputs, taps = geometry.in_channels, geometry.out_channels, geometry.kernel_h * geometry.kernel_w
    if record.depthwise:
        multiplier = outputs // channels
        read = "x[o]" if multiplier == 1 else f"x[o / {multiplier}]"
        return taps, f"{s}_weight[k * {outputs} + o]", f"""const int16_t *w = {s}_w16 + (ky * {geometry.kernel_w} + kx) * {outputs};
                for (o = 0; o < {outputs}; o++)
                    acc[o] += {read} * w[o];"""  # 1HWC: tap-major, channels contiguous
    return taps * channels, f"{s}_weight[o * {taps * channels} + k]", f"""const int16_t *w = {s}_w16 + (ky * {geometry.kernel_w} + kx) * {channels * outputs};
                for (c = 0; c < {channels}; c++) {{
                    const int16_t v = x[c];
                    for (o = 0; o < {outputs}; o++)
                        acc[o] += v * w[c * {outputs} + o];
                }}"""  # OHWI: output-major, then (ky, kx, c) = k


# conv's and dwconv's emitters and packer, by the kind of the record's requantization
emits("conv")(by_requantization({ShiftRequantization: conv_emit_c, ChannelRequantization: conv_affine_emit_c}))
emits("dwconv")(by_requantization({ShiftRequantization: dwconv_emit_c, ChannelRequantization: conv_affine_emit_c}))
packs("conv")(by_requantization({ShiftRequantization: conv_pack_c, ChannelRequantization: conv_affine_pack_c}))
