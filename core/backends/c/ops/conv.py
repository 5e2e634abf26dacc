"""conv and dwconv as C99 (the contract: core/backends/c/emitter.py): the integer kernels' arithmetic
(core/ir/ops/conv/) for one HWC image, one emitter of both dialects by the record's requantization: TF2IR's shifts (a
ShiftRequantization; the notes below) or TFLite's per-channel multipliers (a ChannelRequantization: the arithmetic in
runtime/qt_tflite.h; constants `<symbol>_weight` int8 OHWI, dwconv 1HWC, `_bias`, `_multiplier`, `_shift` int32 per
output channel). A TFLite convolution rounding twice (CONV_2D) takes the same SIMD path (conv_simd on qt_gemm.h's
microkernels) with seed 004's zero-point folding: the input padded with its zero point (whose products are then
(zero point - zero point) x w = 0, as TFLite skips those taps), the GEMM of the raw int8 values, and `bias - zero
point x sum(w)` per output channel folded into the GEMM's offset; the int32 sums are exact (the IR refuses a layer
whose accumulators could leave int32: core/ir/ops/conv/tflite.py), then TFLite's requantization in vectors.

Exactness: every partial sum of a layer fits int32 when the record's accumulator_bound() (for
any int8 weights and bias, so the C depends on the record alone) is <= 2^31 - 1; then the int32
sums are the exact integers in whatever order they are added, and vectorized code gives the
kernel's bytes. A layer beyond the bound sums in int64 (what the kernel then does).

Speed (plain C99 that compilers vectorize; every hot loop has a literal trip count):
conv multiplies im2col rows (the window's HWCi elements widened to int16, zero outside the
input) by the weights widened to int16 once, at the first call, from the IR's HWCiCo
`<symbol>_weight`, in one of two forms:
  - "dot" (reduction K = KH * KW * Ci >= C_DOT_MIN_K): weights [Co][K'] (K' = K rounded up to
    C_K_ALIGN with zeros), 4 pixels x 4 output channels of int16 x int16 dot products summed in
    int32 per pass: the multiply-add of int16 pairs (pmaddwd) over long rows;
  - "broadcast" (short reductions, e.g. a first layer's 3x3x3): weights [K][Co'] (Co' = Co
    rounded up to 16), each input element broadcast against a row of output channels,
    4 pixels per pass; the int16 product is exact (|int8 x int8| <= 2^14).
dwconv copies the input into a zero-padded scratch once per call, then adds x * w (exact in
int16) tap by tap into a row of per-channel sums: at stride 1 one flat loop over the whole
output row per tap, against the tap's weights tiled along the row.
Every array a layer function works in is a file-scope static, none is on its stack: GCC 12
miscompiles some leaf functions built for AVX-512 (x86-64-v4, one of QT_SIMD's clones) that
keep an array in the red zone (an aligned vector store at a misaligned stack address).
"""

from __future__ import annotations

import numpy as np

from core.backends.c.emitter import CodegenError, PackedConstant, c_function, c_values, emits, packs
from core.backends.c.gemm import C_CHUNK_BYTES, SIMD_ANY, SIMD_BLOCK, conv_simd, simd_constants, window_at
from core.backends.c.geometry import Clamp, WindowGeometry
from core.ir.fixedpoint import INT32_MAX
from core.ir.ops.conv.record import ChannelRequantization, ConvLayer, ShiftRequantization, by_requantization

C_K_ALIGN = 32  # int16 elements: a 512-bit vector
C_CO_ALIGN = 16  # output channels of the broadcast form
C_DOT_MIN_K = 64
# TFLite's requantization of the sums, by the record's rounding (runtime/qt_tflite.h)
_REQUANTIZE = {"double": "qt_mbqm", "single": "qt_mbqm_single", "reduced": "qt_mbqm_reduced"}


def _c_requantize_plan(record: ConvLayer, what: str) -> tuple[Clamp, int]:
    """(the output shift and clamp, bias_shift) as the kernel's requantize uses them."""
    shift = int(record.output_shift)
    bias_shift = int(record.bias_shift) if record.load_bias else 0
    if not 0 <= shift <= 31:
        raise CodegenError(f"{what}: output_shift {shift} outside [0, 31]: the C backend shifts an int32/int64 accumulator right")
    if not 0 <= bias_shift <= 40:
        raise CodegenError(f"{what}: bias_shift {bias_shift} outside [0, 40]")
    low, high = record.clamp()
    return Clamp(shift, low, high), bias_shift


def _c_offset(record: ConvLayer, symbol: str, index: str, bias_shift: int, shift: int) -> str:
    """The C expression (int64) of bias << bias_shift + 2^(output_shift - 1) for channel `index`."""
    terms = [f"qt_shl64({symbol}_bias[{index}], {bias_shift})"] if record.load_bias else []
    if shift > 0:
        terms.append(f"(int64_t){1 << (shift - 1)}")
    return " + ".join(terms) or "0"


def _c_comment(kind: str, record: ConvLayer, geometry: WindowGeometry, shift: int) -> str:
    return (f"/* {kind} {geometry.height}x{geometry.width}x{geometry.in_channels} -> {geometry.out_height}x{geometry.out_width}x{geometry.out_channels}, kernel {geometry.kernel_h}x{geometry.kernel_w}, "
            f"stride {geometry.stride_h}x{geometry.stride_w}, dilation {geometry.dilation_h}x{geometry.dilation_w}, pad top {geometry.pad_top} left {geometry.pad_left}; "
            f"{record.activation_type}, >> {shift} */")


def conv_emit_c(record: ConvLayer, symbol: str) -> str:
    """conv as C: `conv_kernel` (core/ir/ops/conv/kernel.py) for one HWC image (the notes above), then requantize exactly as
    `requantize`: + bias << bias_shift, + 2^(output_shift - 1), floor shift (qt_floor_shift32),
    clamp to the Relu6/int8 range."""
    geometry = WindowGeometry.of(record)
    clamp, bias_shift = _c_requantize_plan(record, f"conv {symbol}")
    shift, k = clamp.shift, geometry.taps
    if record.accumulator_bound() > INT32_MAX:
        return _conv_emit_c_int64(record, symbol, geometry, clamp, bias_shift)
    s = symbol
    hp, wp = geometry.padded_height, geometry.padded_width  # the zero-padded input, unless no window leaves the input
    if geometry.needs_padding:
        scratch = f"static int8_t {s}_padded[{hp * wp * geometry.in_channels}]; /* the input, zero-padded to {hp}x{wp} */\n"
        fill = f"""    for (p = 0; p < {geometry.height}; p++) /* the padding stays zero */
        memcpy({s}_padded + ((p + {geometry.pad_top}) * {wp} + {geometry.pad_left}) * {geometry.in_channels}, in0 + p * {geometry.width * geometry.in_channels}, {geometry.width * geometry.in_channels});
"""
        padded = f"{s}_padded"
    else:
        scratch, fill, padded = "", "", "in0"
    form = _conv_dot if k >= C_DOT_MIN_K else _conv_broadcast
    declarations, weight_index, body = form(record, s, geometry, clamp)
    return f"""{_c_comment("conv", record, geometry, shift)}
#if QT_INT8_SIMD /* qt_gemm.h's microkernels on the weights packed at codegen time */
{conv_simd(s, geometry, clamp)}#else /* portable C99 */
{declarations}{scratch}static int {s}_ready;

static void {s}_init(void)
{{
    int co, k;
    for (co = 0; co < {geometry.out_channels}; co++) {{
        for (k = 0; k < {k}; k++)
            {s}_w16[{weight_index}] = {s}_weight[k * {geometry.out_channels} + co];
        {s}_offset[co] = (int32_t)({_c_offset(record, s, "co", bias_shift, shift)});
    }}
    {s}_ready = 1;
}}

QT_SIMD static void {s}(const int8_t *restrict in0, int8_t *restrict out)
{{
    const int8_t *padded = {padded};
    int p;
    if (!{s}_ready)
        {s}_init();
{fill}{body}
}}
#endif
"""


def _c_finish(clamp: Clamp, acc: str) -> str:
    return f"(int8_t)qt_clamp32(qt_floor_shift32({acc}, {clamp.shift}), {clamp.low}, {clamp.high})"


def _conv_im2col(s: str, geometry: WindowGeometry, kp: int, chunk: int) -> str:
    """C: the im2col rows (int16; a row past the last pixel zero) of output pixels
    [p, p + rows) into `<symbol>_cols`, `kp` elements apart."""
    if geometry.dilation_w == 1:  # a kernel row's taps are KW * Ci consecutive elements
        row = f"""                const int8_t *src = window + kh * {geometry.dilation_h * geometry.padded_width * geometry.in_channels};
                int16_t *dst = col + kh * {geometry.kernel_w * geometry.in_channels};
                for (i = 0; i < {geometry.kernel_w * geometry.in_channels}; i++)
                    dst[i] = src[i];"""
    else:
        row = f"""                int kw;
                for (kw = 0; kw < {geometry.kernel_w}; kw++) {{
                    const int8_t *src = window + (kh * {geometry.dilation_h * geometry.padded_width} + kw * {geometry.dilation_w}) * {geometry.in_channels};
                    int16_t *dst = col + (kh * {geometry.kernel_w} + kw) * {geometry.in_channels};
                    for (i = 0; i < {geometry.in_channels}; i++)
                        dst[i] = src[i];
                }}"""
    return f"""        for (r = 0; r < rows; r++) {{ /* im2col */
            int16_t *col = {s}_cols + r * {kp};
            int kh, i;
            const int8_t *window;
            if (p + r >= {geometry.out_height * geometry.out_width}) {{
                memset(col, 0, sizeof(int16_t) * {geometry.taps});
                continue;
            }}
            window = {window_at(geometry, "p + r")};
            for (kh = 0; kh < {geometry.kernel_h}; kh++) {{
{row}
            }}
        }}"""


def _conv_chunks(geometry: WindowGeometry, kp: int) -> tuple[int, str]:
    """(pixels per chunk, the C loop header over chunks declaring r, co and rows)."""
    pixels = geometry.out_height * geometry.out_width
    chunk = min(-(-pixels // 4) * 4, max(4, C_CHUNK_BYTES // (2 * kp) // 4 * 4))
    return chunk, f"""    for (p = 0; p < {pixels}; p += {chunk}) {{
        int r, co, rows = {pixels} - p < {chunk} ? ({pixels} - p + 3) / 4 * 4 : {chunk};"""


def _conv_dot(record: ConvLayer, s: str, geometry: WindowGeometry, clamp: Clamp) -> tuple[str, str, str]:
    """The dot form: im2col rows (int16, zero-padded to kp) of a chunk of pixels times the
    weights [Co][kp], 4 x 4 dot products per pass."""
    k, co, pixels = geometry.taps, geometry.out_channels, geometry.out_height * geometry.out_width
    kp, cop = -(-k // C_K_ALIGN) * C_K_ALIGN, -(-co // 4) * 4
    chunk, loop = _conv_chunks(geometry, kp)
    sums = ", ".join(f"s{i}{j} = 0" for i in range(4) for j in range(4))
    products = "\n".join(f"                    s{i}{j} += x{i}[k] * w{j}[k];" for i in range(4) for j in range(4))
    stores = "\n".join(f"                if (q + {i} < {pixels} && co + {j} < {co}) out[(q + {i}) * {co} + co + {j}] = "
                       + _c_finish(clamp, f"s{i}{j} + {s}_offset[co + {j}]") + ";" for i in range(4) for j in range(4))
    declarations = f"""static int16_t {s}_w16[{cop * kp}]; /* the weights as [Co {cop}][K {kp}], int16, zero-padded */
static int32_t {s}_offset[{cop}]; /* bias << bias_shift + rounding, per output channel */
static int16_t {s}_cols[{chunk * kp}]; /* im2col rows of one chunk of output pixels */
"""
    body = f"""{loop}
{_conv_im2col(s, geometry, kp, chunk)}
        for (co = 0; co < {cop}; co += 4) {{ /* 4 pixels x 4 output channels of dot products */
            const int16_t *w0 = {s}_w16 + co * {kp}, *w1 = w0 + {kp}, *w2 = w1 + {kp}, *w3 = w2 + {kp};
            for (r = 0; r < rows; r += 4) {{
                const int16_t *x0 = {s}_cols + r * {kp}, *x1 = x0 + {kp}, *x2 = x1 + {kp}, *x3 = x2 + {kp};
                int32_t {sums};
                int k, q = p + r;
                for (k = 0; k < {kp}; k++) {{
{products}
                }}
{stores}
            }}
        }}
    }}"""
    return declarations, f"co * {kp} + k", body


def _conv_broadcast(record: ConvLayer, s: str, geometry: WindowGeometry, clamp: Clamp) -> tuple[str, str, str]:
    """The broadcast form: im2col rows (int16) of a chunk of pixels; for 4 pixels at a time,
    each element times the row of the weights [K][Co'] (Co' = Co rounded up to C_CO_ALIGN),
    summed per output channel."""
    k, co, pixels = geometry.taps, geometry.out_channels, geometry.out_height * geometry.out_width
    cop = -(-co // C_CO_ALIGN) * C_CO_ALIGN
    chunk, loop = _conv_chunks(geometry, k)
    declarations = f"""static int16_t {s}_w16[{k * cop}]; /* the weights as [K {k}][Co {cop}], int16, zero-padded */
static int32_t {s}_offset[{cop}]; /* bias << bias_shift + rounding, per output channel */
static int16_t {s}_cols[{chunk * k}]; /* im2col rows of one chunk of output pixels */
static int32_t {s}_acc[{4 * cop}]; /* the sums of 4 pixels */
"""
    body = f"""{loop}
{_conv_im2col(s, geometry, k, chunk)}
        for (r = 0; r < rows; r += 4) {{ /* 4 pixels, each element against a row of output channels */
            int32_t *a0 = {s}_acc, *a1 = a0 + {cop}, *a2 = a1 + {cop}, *a3 = a2 + {cop};
            const int16_t *x = {s}_cols + r * {k};
            int k, i;
            for (co = 0; co < {cop}; co++)
                a0[co] = a1[co] = a2[co] = a3[co] = {s}_offset[co];
            for (k = 0; k < {k}; k++) {{
                const int16_t *w = {s}_w16 + k * {cop};
                int16_t x0 = x[k], x1 = x[{k} + k], x2 = x[{2 * k} + k], x3 = x[{3 * k} + k];
                for (co = 0; co < {cop}; co++) {{
                    a0[co] += (int16_t)(x0 * w[co]);
                    a1[co] += (int16_t)(x1 * w[co]);
                    a2[co] += (int16_t)(x2 * w[co]);
                    a3[co] += (int16_t)(x3 * w[co]);
                }}
            }}
            for (i = 0; i < 4 && p + r + i < {pixels}; i++) {{
                const int32_t *a = a0 + i * {cop};
                int8_t *o = out + (p + r + i) * {co};
                for (co = 0; co < {co}; co++)
                    o[co] = {_c_finish(clamp, "a[co]")};
            }}
        }}
    }}"""
    return declarations, f"k * {cop} + co", body


def _conv_emit_c_int64(record: ConvLayer, symbol: str, geometry: WindowGeometry, clamp: Clamp, bias_shift: int) -> str:
    """A direct convolution with int64 sums, for layers whose sums could leave int32."""
    s, shift, low, high = symbol, clamp.shift, clamp.low, clamp.high
    return f"""{_c_comment("conv", record, geometry, shift)} /* int64 sums */
static void {s}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int oh, ow, co, kh, kw, ci;
    for (oh = 0; oh < {geometry.out_height}; oh++)
        for (ow = 0; ow < {geometry.out_width}; ow++)
            for (co = 0; co < {geometry.out_channels}; co++) {{
                int64_t acc = {_c_offset(record, s, "co", bias_shift, shift)};
                for (kh = 0; kh < {geometry.kernel_h}; kh++) {{
                    int ih = oh * {geometry.stride_h} - {geometry.pad_top} + kh * {geometry.dilation_h};
                    if (ih < 0 || ih >= {geometry.height})
                        continue;
                    for (kw = 0; kw < {geometry.kernel_w}; kw++) {{
                        int iw = ow * {geometry.stride_w} - {geometry.pad_left} + kw * {geometry.dilation_w};
                        if (iw < 0 || iw >= {geometry.width})
                            continue;
                        for (ci = 0; ci < {geometry.in_channels}; ci++)
                            acc += (int64_t)in0[(ih * {geometry.width} + iw) * {geometry.in_channels} + ci] * {s}_weight[((kh * {geometry.kernel_w} + kw) * {geometry.in_channels} + ci) * {geometry.out_channels} + co];
                    }}
                }}
                out[(oh * {geometry.out_width} + ow) * {geometry.out_channels} + co] = (int8_t)qt_clamp64(qt_floor_shift64(acc, {shift}), {low}, {high});
            }}
}}
"""


def _dwconv_taps(s: str, geometry: WindowGeometry, wp: int, acc_type: str) -> tuple[str, str, str]:
    """(declaration, initialisation, C of one tap over an output row): at stride 1 a tap's inputs
    for the whole row are one contiguous run, against the tap's weights tiled along the row."""
    c, ow = geometry.in_channels, geometry.out_width
    row = ow * c
    if geometry.stride_w == 1:
        tiled = f"static int8_t {s}_tiled[{geometry.kernel_h * geometry.kernel_w * row}]; /* each tap's weights repeated along the output row */\n"
        tile = f"""    for (int t = 0; t < {geometry.kernel_h * geometry.kernel_w}; t++)
        for (i = 0; i < {row}; i++)
            {s}_tiled[t * {row} + i] = {s}_weight[t * {c} + i % {c}];
"""
        taps = f"""                    const int8_t *x = {s}_padded + (ih * {wp} + kw * {geometry.dilation_w}) * {c}, *w = {s}_tiled + (kh * {geometry.kernel_w} + kw) * {row};
                    for (i = 0; i < {row}; i++)
                        acc[i] += (int16_t)(x[i] * w[i]);"""
        return tiled, tile, taps
    taps = f"""                    const int8_t *w = {s}_weight + (kh * {geometry.kernel_w} + kw) * {c};
                    for (j = 0; j < {ow}; j++) {{
                        const int8_t *x = {s}_padded + (ih * {wp} + j * {geometry.stride_w} + kw * {geometry.dilation_w}) * {c};
                        {acc_type} *a = acc + j * {c};
                        for (i = 0; i < {c}; i++)
                            a[i] += (int16_t)(x[i] * w[i]);
                    }}"""
    return "", "", taps


def dwconv_emit_c(record: ConvLayer, symbol: str) -> str:
    """dwconv as C: `dwconv_kernel` for one HWC image (the notes above): sums in int32 when
    the record's accumulator_bound allows (else int64), then requantize as conv."""
    geometry = WindowGeometry.of(record)
    clamp, bias_shift = _c_requantize_plan(record, f"dwconv {symbol}")
    shift, low, high = clamp.shift, clamp.low, clamp.high
    wide = record.accumulator_bound() > INT32_MAX
    acc_type, bits = ("int64_t", 64) if wide else ("int32_t", 32)
    c, s, ow = geometry.in_channels, symbol, geometry.out_width
    hp, wp = geometry.padded_height, geometry.padded_width
    row = ow * c
    tiled, tile, taps = _dwconv_taps(s, geometry, wp, acc_type)
    return f"""{_c_comment("dwconv", record, geometry, shift)}
static {acc_type} {s}_offset[{c}]; /* bias << {bias_shift} + rounding, per channel */
static int8_t {s}_padded[{hp * wp * c}]; /* the input, zero-padded to {hp}x{wp} */
static {acc_type} {s}_acc[{row}]; /* one output row of sums */
{tiled}static int {s}_ready;

static void {s}_init(void)
{{
    int i;
    for (i = 0; i < {c}; i++)
        {s}_offset[i] = ({acc_type})({_c_offset(record, s, "i", bias_shift, shift)});
{tile}    {s}_ready = 1;
}}

QT_SIMD static void {s}(const int8_t *restrict in0, int8_t *restrict out)
{{
    {acc_type} *acc = {s}_acc;
    int oh, kh, kw, i, j;
    if (!{s}_ready)
        {s}_init();
    for (i = 0; i < {geometry.height}; i++) /* the padding stays zero */
        memcpy({s}_padded + ((i + {geometry.pad_top}) * {wp} + {geometry.pad_left}) * {c}, in0 + i * {geometry.width * c}, {geometry.width * c});
    for (oh = 0; oh < {geometry.out_height}; oh++) {{
        int8_t *o = out + oh * {row};
        for (j = 0; j < {ow}; j++)
            for (i = 0; i < {c}; i++)
                acc[j * {c} + i] = {s}_offset[i];
        for (kh = 0; kh < {geometry.kernel_h}; kh++) {{
            int ih = oh * {geometry.stride_h} + kh * {geometry.dilation_h};
            for (kw = 0; kw < {geometry.kernel_w}; kw++) {{
{taps}
            }}
        }}
        for (i = 0; i < {row}; i++)
            o[i] = (int8_t)qt_clamp{bits}(qt_floor_shift{bits}(acc[i], {shift}), {low}, {high});
    }}
}}
"""


def simd_reduction(record: ConvLayer) -> tuple[int, int]:
    """(K, K rounded up to a multiple of 4): the GEMM's reduction, as the SIMD path lays it out."""
    k = record.kernel_size.height * record.kernel_size.width * record.input_channel_num
    return k, -(-k // 4) * 4


def conv_pack_c(record: ConvLayer, params: dict[str, np.ndarray]) -> list[PackedConstant]:
    """For the SIMD path (simd_constants): the HWCiCo weights, the offsets bias << bias_shift + 2^(shift - 1). None for a
    layer that sums in int64."""
    if record.accumulator_bound() > INT32_MAX:
        return []
    clamp, bias_shift = _c_requantize_plan(record, f"conv {record.name}")
    k, _ = simd_reduction(record)
    offset = np.zeros(record.output_channel_num, np.int64)
    if record.load_bias:
        offset += np.asarray(params["bias"], np.int64) << bias_shift
    offset += (1 << (clamp.shift - 1)) if clamp.shift > 0 else 0
    return simd_constants(np.asarray(params["weight"], np.int8).reshape(k, record.output_channel_num), offset, 0)


# TFLite's convolutions (a ChannelRequantization): the input's zero point folded, TFLite's requantization
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
    """For the SIMD path (simd_constants): the OHWI weights as [K][Co], the offsets the bias less the input's zero
    point's products; and the requantization [block][multiplier 16][left shift 16][right shift 16]."""
    if not simd_applies(record):
        return []
    outputs = record.output_channel_num
    blocks = -(-outputs // SIMD_BLOCK)
    weight = np.asarray(params["weight"], np.int8).reshape(outputs, -1).T  # [K][Co]
    bias = np.asarray(params["bias"], np.int64) if record.load_bias else np.zeros(outputs, np.int64)
    constants = simd_constants(weight, bias, record.input_grid.zero_point)
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
