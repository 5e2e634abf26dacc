/* TFLite's int8 arithmetic (core/quantize/tflite_math.py) in C99, for the layers of the tflite_int8
 * dialect: the same integers as TFLite's reference kernels, with no implementation-defined shift of a
 * negative value and no signed overflow (int64 throughout; int64_t is two's complement by definition).
 * Included by qt_runtime.h. */
#ifndef QT_TFLITE_H
#define QT_TFLITE_H

/* v reduced to int32 as two's complement arithmetic leaves it (TFLite's int32 left shift wraps) */
static inline int64_t qt_wrap32(int64_t v)
{
    int64_t low = v & INT64_C(0xFFFFFFFF);
    return low >= INT64_C(0x80000000) ? low - INT64_C(0x100000000) : low;
}

/* gemmlowp's SaturatingRoundingDoublingHighMul: the high 32 bits of 2ab rounded to nearest (ties up),
 * INT32_MIN x INT32_MIN saturating to INT32_MAX */
static inline int64_t qt_srdhm(int64_t a, int64_t b)
{
    if (a == INT32_MIN && b == INT32_MIN)
        return INT32_MAX;
    return qt_floor_shift64(a * b + (INT64_C(1) << 30), 31);
}

/* gemmlowp's RoundingDivideByPOT: x / 2^e to nearest, ties away from zero; e >= 0 */
static inline int64_t qt_rdbpot(int64_t x, int e)
{
    if (e <= 0)
        return x;
    return qt_floor_shift64(x + (INT64_C(1) << (e - 1)) - (x < 0 ? 1 : 0), e);
}

/* MultiplyByQuantizedMultiplier, rounding twice (TFLite's convolutions, add, mean): x shifted left by
 * max(shift, 0) in int32, the doubling high multiply, the rounding right shift by max(-shift, 0) */
static inline int64_t qt_mbqm(int64_t x, int64_t multiplier, int shift)
{
    int64_t scaled = shift > 0 ? qt_wrap32(qt_shl64(x, shift)) : x;
    return qt_rdbpot(qt_srdhm(scaled, multiplier), shift < 0 ? -shift : 0);
}

/* MultiplyByQuantizedMultiplier rounding once (LiteRT's reference FULLY_CONNECTED):
 * (x * multiplier + 2^(30 - shift)) >> (31 - shift) in 64 bits, cast to int32 (wrapping, as static_cast does) */
static inline int64_t qt_mbqm_single(int64_t x, int64_t multiplier, int shift)
{
    int total = 31 - shift;
    return qt_wrap32(qt_floor_shift64(x * multiplier + (INT64_C(1) << (total - 1)), total));
}

/* MultiplyByQuantizedMultiplier of an int64 x (TFLite's 16x8 convolutions' sums): the multiplier rounded to 16 bits,
 * (multiplier + 2^15) >> 16 (0x7FFF from 0x7FFF0000 up), then (x * reduced + 2^(14 - shift)) >> (15 - shift), cast to
 * int32 (wrapping, as static_cast does); |x| < 2^47 (the IR checks it) */
static inline int64_t qt_mbqm_reduced(int64_t x, int64_t multiplier, int shift)
{
    int64_t reduced = multiplier < INT64_C(0x7FFF0000) ? (multiplier + (INT64_C(1) << 15)) >> 16 : INT64_C(0x7FFF);
    int total = 15 - shift;
    return qt_wrap32(qt_floor_shift64(x * reduced + (INT64_C(1) << (total - 1)), total));
}

/* gemmlowp's SaturatingRoundingMultiplyByPOT<e> for 0 < e < 31: x * 2^e, saturated to int32 */
static inline int64_t qt_sat_shl32(int64_t x, int e)
{
    int64_t threshold = (INT64_C(1) << (31 - e)) - 1;
    return x > threshold ? INT32_MAX : x < -threshold ? INT32_MIN : qt_shl64(x, e);
}

/* gemmlowp's one_over_one_plus_x_for_x_in_0_1 (Q0 in and out): three Newton-Raphson steps from 48/17 - 32/17 d on
 * the half denominator d = (1 + a) / 2 rounded half away from zero (RoundingHalfSum; C99 division truncates) */
static inline int64_t qt_one_over_one_plus_x(int64_t a)
{
    int64_t sum = a + INT32_MAX, x;
    int64_t half_denominator = (sum + (sum >= 0 ? 1 : -1)) / 2;
    int step;
    x = qt_wrap32(INT64_C(1515870810) + qt_srdhm(half_denominator, INT64_C(-1010580540)));
    for (step = 0; step < 3; step++) {
        int64_t one_minus = qt_wrap32((INT64_C(1) << 29) - qt_srdhm(half_denominator, x));
        x = qt_wrap32(x + qt_sat_shl32(qt_srdhm(x, one_minus), 2));
    }
    return qt_sat_shl32(x, 1);
}

/* TFLite's GetReciprocal of a positive x with `integer_digits` integer bits: 1 / x shifted into [1, 2) as Q0, and
 * the bits x was above one */
static inline int64_t qt_reciprocal(int64_t x, int integer_digits, int *bits_over_unit)
{
    uint32_t value = (uint32_t)(x & INT64_C(0xFFFFFFFF));
    int headroom_plus_one = 0;
    while (headroom_plus_one < 32 && !(value & UINT32_C(0x80000000))) {
        value <<= 1;
        headroom_plus_one++;
    }
    *bits_over_unit = integer_digits - headroom_plus_one;
    return qt_one_over_one_plus_x(qt_wrap32((int64_t)value - (INT64_C(1) << 31)));
}

/* LUTLookup of an int16 value in a 513-entry table (tflite_math.lut_lookup_int16): the entry at 256 + (value >> 7),
 * plus its slope (an int16, as the kernel holds it) times the low 7 bits, rounded; the sum an int16 (the table held as
 * int32, as the layers' constants are) */
static inline int64_t qt_lut_lookup_int16(int64_t value, const int32_t *lut)
{
    int64_t high = qt_floor_shift64(value, 7), base = lut[256 + high];
    int16_t slope = (int16_t)(lut[257 + high] - base);
    return (int16_t)(base + qt_floor_shift64((int64_t)slope * (value - high * 128) + 64, 7));
}

/* GetInvSqrtQuantizedMultiplierExp(value, kReverseShift) (lut/affine.py: inv_sqrt_quantized_multiplier_exp): 1 / sqrt(value)
 * as a Q31 multiplier and a left shift, by five Newton-Raphson steps in Q3.28 from x = 1 on the value normalized to
 * [2^27, 2^29) by pairs of bits; (INT32_MAX, 0) at or below 1 */
static inline int64_t qt_inv_sqrt(int64_t value, int *left_shift)
{
    int64_t half_input, x = INT64_C(1) << 28, inverse;
    const int64_t half_three = (INT64_C(1) << 28) + (INT64_C(1) << 27);
    int shift = 11, length = 0, pairs, step;
    *left_shift = 0;
    if (value <= 1)
        return INT32_MAX;
    while (value >= (INT64_C(1) << 29)) {
        value /= 4;
        shift++;
    }
    while ((value >> length) != 0)
        length++;
    pairs = (32 - length - 1) / 2 - 1;
    shift -= pairs;
    value <<= 2 * pairs;
    half_input = qt_rdbpot(value >> 1, 1);
    for (step = 0; step < 5; step++) {
        int64_t cube = qt_sat_shl32(qt_srdhm(qt_srdhm(x, x), x), 6);
        x = qt_sat_shl32(qt_wrap32(qt_srdhm(half_three, x) - qt_srdhm(half_input, cube)), 3);
    }
    inverse = qt_srdhm(x, INT64_C(1518500250)); /* sqrt(2) / 2 in Q0.31 */
    if (shift < 0) {
        inverse = qt_shl64(inverse, -shift);
        shift = 0;
    }
    *left_shift = -shift;
    return inverse;
}

/* RsqrtEvalQuantized of a value less its zero point (lut/affine.py: rsqrt_fixed_point): 1 / sqrt(value) scaled by 2^20,
 * requantized by the output multiplier less those 20 bits, plus the output zero point, clamped to [low, high]; 0 gives high */
static inline int64_t qt_rsqrt(int64_t value, int64_t multiplier, int shift, int64_t zero_point, int64_t low, int64_t high)
{
    int inverse_shift;
    int64_t inverse;
    if (value == 0)
        return high;
    inverse = qt_inv_sqrt(value, &inverse_shift);
    return qt_clamp64(qt_mbqm(qt_mbqm(1, inverse, inverse_shift + 20), multiplier, shift - 20) + zero_point, low, high);
}

#endif /* QT_TFLITE_H */
