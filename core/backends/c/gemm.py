"""The C of a windowed layer's int8 GEMM on qt_gemm.h's SIMD microkernels (runtime/qt_gemm.h: AVX2 and AVX-512 VNNI;
a build without them takes the emitter's portable C): the activations biased into QT_A and padded, im2col rows chunk by
chunk (or the input as is for a 1x1 stride-1 layer), the GEMM with each output channel's int32 offset, the
requantization of TF2IR's shift or of TFLite's per-channel multipliers, the clamp; and the constants it reads, packed at
codegen time. The conv emitters of both dialects call it (ops/conv.py); its fast path is tested against their
portable C and the kernels (tests/test_codegen.py)."""

from __future__ import annotations

import numpy as np

from core.backends.c.emitter import PackedConstant
from core.backends.c.geometry import Clamp, WindowGeometry

C_CHUNK_BYTES = 1 << 16  # im2col rows per chunk: about this many bytes (L1/L2)
SIMD_BLOCK = 16  # output channels per block of qt_gemm.h's packed weights
SIMD_PATHS = {"vnni": "QT_INT8_SIMD == 2", "avx2": "QT_INT8_SIMD == 1"}  # path -> when a build takes it
SIMD_A_BIAS = {"vnni": 128, "avx2": 0}  # what qt_gemm.h's `a` adds to each activation (QT_A_BIAS)
SIMD_ANY = "QT_INT8_SIMD"  # the condition of what both SIMD paths read


def window_at(geometry: WindowGeometry, pixel: str) -> str:
    """C: the padded input at the top left of output pixel `pixel`'s window."""
    return f"padded + (({pixel}) / {geometry.out_width} * {geometry.stride_h * geometry.padded_width} + ({pixel}) % {geometry.out_width} * {geometry.stride_w}) * {geometry.in_channels}"


def conv_simd(s: str, geometry: WindowGeometry, clamp: Clamp, pad_value: int = 0, requantize: str | None = None) -> str:
    """C: conv through qt_gemm_s8. The activations are copied once, biased (QT_A_BIAS) into a
    buffer padded with `pad_value` (TF2IR: 0, the bias of 0; TFLite: the input's zero point, whose
    products the offsets take back out); a 1x1 stride-1 layer with Ci % 4 == 0 multiplies
    that buffer as is (no im2col), any other gathers its im2col rows (K padded to kp) chunk by chunk.
    `requantize`: qt_gemm_s8's `tflite, zero_point, shift` arguments (default TF2IR's: NULL, 0, the shift)."""
    kp = -(-geometry.taps // 4) * 4
    pixels, blocks = geometry.out_height * geometry.out_width, -(-geometry.out_channels // SIMD_BLOCK)
    tile_rows = lambda rows: -(-rows // 4) * 4  # noqa: E731  (qt_gemm.h reads whole tiles of QT_GEMM_ROWS = 4)
    requantize = requantize or f"NULL, 0, {clamp.shift}"
    gemm = f"{s}_packed, {blocks}, {s}_offset, {requantize}, {clamp.low}, {clamp.high}"
    fill = _fill(s, geometry)
    direct = (geometry.kernel_h, geometry.kernel_w, geometry.stride_h, geometry.stride_w) == (1, 1, 1, 1) and geometry.in_channels % 4 == 0 and geometry.padded_width == geometry.width \
        and geometry.padded_height == geometry.height and not (geometry.pad_top or geometry.pad_left)
    if direct:
        return f"""static qt_a_t {s}_x[{max(geometry.padded_height * geometry.padded_width * geometry.in_channels, tile_rows(pixels) * kp)}]; /* the input as QT_A */

static void {s}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int p, i;
{fill}    qt_gemm_s8({s}_x, {pixels}, {kp}, {gemm}, out, {geometry.out_channels});
}}
"""
    chunk = min(tile_rows(pixels), max(4, C_CHUNK_BYTES // kp // 4 * 4))
    if geometry.dilation_w == 1:  # a kernel row's taps are KW * Ci consecutive bytes
        gather = f"""            for (kh = 0; kh < {geometry.kernel_h}; kh++)
                memcpy(row + kh * {geometry.kernel_w * geometry.in_channels}, window + kh * {geometry.dilation_h * geometry.padded_width * geometry.in_channels}, sizeof(qt_a_t) * {geometry.kernel_w * geometry.in_channels});"""
    else:
        gather = f"""            for (kh = 0; kh < {geometry.kernel_h}; kh++)
                for (kw = 0; kw < {geometry.kernel_w}; kw++)
                    memcpy(row + (kh * {geometry.kernel_w} + kw) * {geometry.in_channels}, window + (kh * {geometry.dilation_h * geometry.padded_width} + kw * {geometry.dilation_w}) * {geometry.in_channels}, sizeof(qt_a_t) * {geometry.in_channels});"""
    window = window_at(geometry, "p + r").replace("padded + ", f"{s}_x + ")
    return f"""static qt_a_t {s}_x[{geometry.padded_height * geometry.padded_width * geometry.in_channels}]; /* the input as QT_A, padded */
static qt_a_t {s}_rows[{chunk * kp}]; /* im2col rows of one chunk of output pixels, K padded to {kp} */
static int {s}_ready; /* the padding and the rows' K..kp are written once: no call writes over them */

static void {s}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int p, i, r, kh, kw;
    if (!{s}_ready) {{
{_pad(s, pad_value)}
        memset({s}_rows, QT_A_BIAS, sizeof {s}_rows); /* K..kp: their weights are 0 */
        {s}_ready = 1;
    }}
{fill}    (void)kw;
    for (p = 0; p < {pixels}; p += {chunk}) {{
        int rows = {pixels} - p < {chunk} ? {pixels} - p : {chunk};
        for (r = 0; r < rows; r++) {{
            qt_a_t *row = {s}_rows + r * {kp};
            const qt_a_t *window = {window};
{gather}
        }}
        qt_gemm_s8({s}_rows, rows, {kp}, {gemm}, out + p * {geometry.out_channels}, {geometry.out_channels});
    }}
}}
"""


def _fill(s: str, geometry: WindowGeometry) -> str:
    """C: the input copied into the padded buffer `<symbol>_x` as QT_A."""
    return f"""    for (p = 0; p < {geometry.height}; p++) {{
        const int8_t *src = in0 + p * {geometry.width * geometry.in_channels};
        qt_a_t *dst = {s}_x + ((p + {geometry.pad_top}) * {geometry.padded_width} + {geometry.pad_left}) * {geometry.in_channels};
        for (i = 0; i < {geometry.width * geometry.in_channels}; i++)
            dst[i] = QT_A(src[i]);
    }}
"""


def _pad(s: str, value: int) -> str:
    if value == 0:
        return f"        memset({s}_x, QT_A_BIAS, sizeof {s}_x); /* the padding: QT_A(0) in every byte */"
    return f"""        for (i = 0; i < (int)(sizeof {s}_x / sizeof {s}_x[0]); i++) /* the padding: QT_A({value}) */
            {s}_x[i] = QT_A({value});"""


def simd_constants(weight: np.ndarray, offset: np.ndarray, input_zero_point: int) -> list[PackedConstant]:
    """qt_gemm.h's blocks of each SIMD path of the GEMM's [K][Co] weights (zero past K and Co), and each path's int32
    offsets per output channel: `offset` less (the input's zero point + the path's QT_A_BIAS) x the channel's weight
    sum, wrapped to int32 as the vector sums wrap (0 past Co)."""
    k, outputs = weight.shape
    kp, blocks = -(-k // 4) * 4, -(-outputs // SIMD_BLOCK)
    padded = np.zeros((kp, blocks * SIMD_BLOCK), np.int8)
    padded[:k, :outputs] = weight
    vnni = padded.reshape(kp // 4, 4, blocks, SIMD_BLOCK).transpose(2, 0, 3, 1)  # [block][k-quad][channel][4]
    avx2 = padded.astype(np.int16).reshape(kp // 2, 2, blocks, SIMD_BLOCK).transpose(2, 0, 3, 1)  # [block][k-pair][channel][2]
    channel_offset = np.zeros(blocks * SIMD_BLOCK, np.int64)
    channel_offset[:outputs] = offset
    column_sums = padded.astype(np.int64).sum(axis=0)
    constants = [PackedConstant("packed", np.ascontiguousarray(vnni), SIMD_PATHS["vnni"]),
                 PackedConstant("packed", np.ascontiguousarray(avx2), SIMD_PATHS["avx2"])]
    for path, condition in SIMD_PATHS.items():
        wrapped = (channel_offset - (input_zero_point + SIMD_A_BIAS[path]) * column_sums + 2**31) % 2**32 - 2**31
        constants.append(PackedConstant("offset", wrapped.astype(np.int32), condition))
    return constants
