"""softmax, of both dialects, as C99 (the contract: core/backends/c/emitter.py): TF2IR's integer model, or TFLite's
gemmlowp fixed point (the arithmetic: runtime/qt_tflite.h)."""

from __future__ import annotations

from core.backends.c.emitter import c_function, emits
from core.ir.ops.softmax.affine import ACCUMULATION_INTEGER_BITS, int16_luts, int16_scaling, softmax_exp_table
from core.quantize.tflite_math import LUT_STEPS
from core.ir.ops.softmax.record import ExpTableDivision, FixedPointSoftmax, SoftmaxLayer, exp_table
from core.ir.records import by_arithmetic


@emits("softmax")
def softmax_emit_c(record: SoftmaxLayer, symbol: str) -> str:
    """The record's softmax, by its normalization (C_SOFTMAX)."""
    return C_SOFTMAX(record, symbol)


def _pow2_softmax_c(record: SoftmaxLayer, symbol: str) -> str:
    """`softmax_model` (core/ir/ops/softmax/kernel.py) for one image, row by row: d = max - x, e = exp_table[d] (baked in, of
    input_log2scale and beta), the int64 sum, and (e * 2^(output_log2scale + 1) + sum) /
    (2 sum) -- non-negative, so C's division is the floor --, saturated to 127."""
    classes, rows = record.classes, record.rows()
    normalization = record.normalization
    table = ", ".join(str(int(v)) for v in exp_table(normalization.input_log2scale, normalization.beta))
    numerator_scale = 1 << (normalization.output_log2scale + 1)
    return f"""/* softmax over {classes} values, {rows} row(s); exp table at input log2scale {normalization.input_log2scale}, beta {normalization.beta:g} */
static const int32_t {symbol}_exp[256] = {{{table}}};

static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int row, i;
    for (row = 0; row < {rows}; row++) {{
        const int8_t *x = in0 + row * {classes};
        int8_t *y = out + row * {classes};
        int32_t largest = x[0];
        int64_t total = 0;
        for (i = 1; i < {classes}; i++) {{
            if (x[i] > largest) largest = x[i];
        }}
        for (i = 0; i < {classes}; i++) {{
            total += {symbol}_exp[largest - x[i]];
        }}
        for (i = 0; i < {classes}; i++) {{
            int64_t q = ((int64_t){symbol}_exp[largest - x[i]] * INT64_C({numerator_scale}) + total) / (2 * total);
            y[i] = (int8_t)(q > 127 ? 127 : q);
        }}
    }}
}}
"""


def _tflite_softmax_c(record: SoftmaxLayer, symbol: str) -> str:
    """TFLite's int8 SOFTMAX per row in gemmlowp fixed point (core/ir/ops/softmax/affine.py): the exp of each
    difference from the row's maximum from the layer's table (-1: below diff_min, not counted), the sum of the
    exps / 2^12 rounded (int32, wrapping as the reference's FixedPoint adds), its reciprocal (qt_reciprocal), each
    output the reciprocal times its exp, rounded by 2^-(bits over one + 23), less 128, saturated."""
    table = ", ".join(str(int(v)) for v in softmax_exp_table(record.normalization.input_scale, record.normalization.beta))
    classes, rows = record.classes, record.rows()
    return f"""/* softmax over {classes} values, {rows} row(s) (tflite_int8, fixed point) */
static const int32_t {symbol}_exp[256] = {{{table}}};

static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int row, i, bits_over_unit;
    for (row = 0; row < {rows}; row++) {{
        const int8_t *x = in0 + row * {classes};
        int8_t *y = out + row * {classes};
        int largest = x[0];
        int64_t total = 0, reciprocal;
        for (i = 1; i < {classes}; i++)
            if (x[i] > largest)
                largest = x[i];
        for (i = 0; i < {classes}; i++) {{
            int32_t e = {symbol}_exp[largest - x[i]];
            if (e >= 0)
                total = qt_wrap32(total + qt_rdbpot(e, {ACCUMULATION_INTEGER_BITS}));
        }}
        reciprocal = qt_reciprocal(total, {ACCUMULATION_INTEGER_BITS}, &bits_over_unit);
        for (i = 0; i < {classes}; i++) {{
            int32_t e = {symbol}_exp[largest - x[i]];
            y[i] = e < 0 ? -128 : (int8_t)qt_clamp64(qt_rdbpot(qt_srdhm(reciprocal, e), bits_over_unit + 23) - 128, -128, 127);
        }}
    }}
}}
"""


def _tflite_softmax_int16_c(record: SoftmaxLayer, symbol: str) -> str:
    """TFLite's int16 SOFTMAX per row (core/ir/ops/softmax/affine.py: softmax_int16): each difference from the row's
    maximum rescaled onto the exp table's steps (qt_mbqm), recentred, its exp by the interpolating lookup (kept in
    `out` until the sum is known); the sum normalized by its leading zeros, its reciprocal by the 1 / (1 + x) table;
    each output the exp x the reciprocal, rounded, in [0, 32767]."""
    exp_lut, reciprocal_lut = (", ".join(str(int(v)) for v in table) for table in int16_luts(record.lut_precision))
    multiplier, shift = int16_scaling(record.normalization.input_scale, record.normalization.beta)
    classes, rows, s = record.classes, record.rows(), symbol
    return f"""/* softmax over {classes} values, {rows} row(s) (tflite_int8, int16: lookup tables) */
static const int32_t {s}_exp_lut[{LUT_STEPS + 1}] = {{{exp_lut}}};
static const int32_t {s}_reciprocal_lut[{LUT_STEPS + 1}] = {{{reciprocal_lut}}};

{c_function(record, s, 1)}    int row, i;
    for (row = 0; row < {rows}; row++) {{
        const int16_t *x = in0 + row * {classes};
        int16_t *y = out + row * {classes};
        int64_t largest = x[0], total = 0, shifted, reciprocal;
        uint32_t normalized;
        int headroom_plus_one = 0, right_shift;
        for (i = 1; i < {classes}; i++)
            if (x[i] > largest)
                largest = x[i];
        for (i = 0; i < {classes}; i++) {{
            int64_t scaled = qt_mbqm(x[i] - largest, INT64_C({multiplier}), {shift});
            y[i] = (int16_t)qt_lut_lookup_int16(qt_clamp64(scaled + 32767, -32768, 32767), {s}_exp_lut);
            total += y[i];
        }}
        normalized = (uint32_t)total;
        while (headroom_plus_one < 32 && !(normalized & UINT32_C(0x80000000))) {{
            normalized <<= 1;
            headroom_plus_one++;
        }}
        shifted = qt_floor_shift64(qt_shl64(total, headroom_plus_one - 1) + (1 << 13), 14);
        reciprocal = qt_lut_lookup_int16(qt_clamp64(shifted - (1 << 15) - (1 << 16), -32768, 32767), {s}_reciprocal_lut);
        right_shift = 31 - headroom_plus_one;
        for (i = 0; i < {classes}; i++)
            y[i] = (int16_t)qt_clamp64(qt_floor_shift64(y[i] * reciprocal + (INT64_C(1) << (right_shift - 1)), right_shift), 0, 32767);
    }}
}}
"""


def _tflite_softmax_by_width(record: SoftmaxLayer, symbol: str) -> str:
    return {8: _tflite_softmax_c, 16: _tflite_softmax_int16_c}[record.normalization.bits](record, symbol)


C_SOFTMAX = by_arithmetic("normalization", {ExpTableDivision: _pow2_softmax_c, FixedPointSoftmax: _tflite_softmax_by_width})  # then its width
