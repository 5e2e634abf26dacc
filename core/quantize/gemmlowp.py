"""gemmlowp's 32-bit fixed-point arithmetic (fixedpoint/fixedpoint.h), as TensorFlow Lite's reference
integer kernels use it for the functions they compute without a float table: exp on negative values,
1 / (1 + x), logistic and tanh (TFLite Micro's int8 LOGISTIC, TANH and SOFTMAX). A FixedPoint<int32, k>
is its raw int32 with k integer bits (real = raw / 2^(31 - k)); every function here takes and returns raw
values as int64 numpy arrays holding int32 values, and wraps to int32 where the C code's int32 arithmetic
would. The module's names are gemmlowp's."""

from __future__ import annotations

import numpy as np

from core.quantize.tflite_math import INT32_MAX, INT32_MIN, rounding_divide_by_pot, saturating_rounding_doubling_high_mul, wrap_int32

Raw = np.ndarray


def srdhm(a, b) -> Raw:
    """FixedPoint multiplication: SaturatingRoundingDoublingHighMul of the raw values."""
    return saturating_rounding_doubling_high_mul(a, b)


def add(a, b) -> Raw:
    return wrap_int32(np.asarray(a, np.int64) + np.asarray(b, np.int64))


def sub(a, b) -> Raw:
    return wrap_int32(np.asarray(a, np.int64) - np.asarray(b, np.int64))


def saturating_rounding_multiply_by_pot(x, exponent: int) -> Raw:
    """x x 2^exponent: a saturating left shift (exponent > 0) or a rounding right shift (exponent < 0)."""
    x = np.asarray(x, np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent))


def rescale(x, source_integer_bits: int, target_integer_bits: int) -> Raw:
    """Rescale<target>(FixedPoint<int32, source>)."""
    return saturating_rounding_multiply_by_pot(x, source_integer_bits - target_integer_bits)


def constant_pot(exponent: int, integer_bits: int) -> int:
    """FixedPoint<int32, integer_bits>::ConstantPOT<exponent>()."""
    return 1 << (31 - integer_bits + exponent)


def one(integer_bits: int) -> int:
    return INT32_MAX if integer_bits == 0 else 1 << (31 - integer_bits)


def rounding_half_sum(a, b) -> Raw:
    """(a + b + sign) / 2 in 64 bits, C's truncating division."""
    total = np.asarray(a, np.int64) + np.asarray(b, np.int64)
    total = total + np.where(total >= 0, 1, -1)
    return np.where(total >= 0, total // 2, -((-total) // 2))


def exp_on_interval_between_negative_one_quarter_and_0_excl(a) -> Raw:
    """exp(a) for a in [-1/4, 0), Q0 in and out: a Taylor expansion around -1/8."""
    constant_term, constant_1_over_3 = 1895147668, 715827883
    x = add(a, constant_pot(-3, 0))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2)
    polynomial = saturating_rounding_multiply_by_pot(add(srdhm(add(x4_over_4, x3), constant_1_over_3), x2), -1)
    return add(constant_term, srdhm(constant_term, add(x, polynomial)))


# exp(-2^k) in Q0 for the barrel shifter of exp_on_negative_values, k = -2 .. 4
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits: int) -> Raw:
    """exp(a) for a <= 0 given as FixedPoint<int32, integer_bits>, as Q0."""
    a = np.asarray(a, np.int64)
    fractional_bits = 31 - integer_bits
    quarter = constant_pot(-2, integer_bits)
    a_mod_quarter_minus_quarter = sub(a & (quarter - 1), quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(rescale(a_mod_quarter_minus_quarter, integer_bits, 0))
    remainder = sub(a_mod_quarter_minus_quarter, a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (fractional_bits + exponent)
            result = np.where((remainder & bit) != 0, srdhm(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, one(0), result)


def _newton_reciprocal(half_denominator) -> Raw:
    """x ~ 1 / half_denominator in Q2 by three Newton-Raphson steps from 48/17 - 32/17 x d."""
    constant_48_over_17, constant_neg_32_over_17 = 1515870810, -1010580540
    x = add(constant_48_over_17, srdhm(half_denominator, constant_neg_32_over_17))
    for _ in range(3):
        half_denominator_times_x = srdhm(half_denominator, x)
        one_minus = sub(one(2), half_denominator_times_x)
        x = add(x, rescale(srdhm(x, one_minus), 4, 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a) -> Raw:
    """1 / (1 + a) for a in (0, 1), Q0."""
    x = _newton_reciprocal(rounding_half_sum(a, one(0)))
    return rescale(x, 1, 0)  # ExactMulByPot<-1> of a Q2 value is Q1, then Rescale<0>


def one_minus_x_over_one_plus_x_for_x_in_0_1(a) -> Raw:
    """(1 - a) / (1 + a) for a in (0, 1), Q0."""
    x = _newton_reciprocal(rounding_half_sum(a, one(0)))
    return rescale(sub(x, one(2)), 2, 0)


def logistic(a, integer_bits: int) -> Raw:
    """1 / (1 + exp(-a)) of FixedPoint<int32, integer_bits>, Q0."""
    a = np.asarray(a, np.int64)
    positive = a > 0
    magnitude = np.where(positive, a, wrap_int32(-a))
    on_positive = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(wrap_int32(-magnitude), integer_bits))
    result = np.where(positive, on_positive, sub(one(0), on_positive))
    return np.where(a == 0, 1 << 30, result)


def tanh(a, integer_bits: int) -> Raw:
    """tanh of FixedPoint<int32, integer_bits>, Q0."""
    a = np.asarray(a, np.int64)
    negative = a < 0
    n = np.where(negative, a, wrap_int32(-a))  # -|a|
    # ExactMulByPot<1>: the same raw value with one more integer bit
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, wrap_int32(-t), t))


def count_leading_zeros(x) -> Raw:
    """Of each value as uint32 (32 for 0): 32 less its bit length, frexp's exponent (exact below 2^53)."""
    x = np.asarray(x, np.int64) & 0xFFFFFFFF
    return 32 - np.frexp(x.astype(np.float64))[1].astype(np.int64)


def get_reciprocal(x, integer_digits: int) -> tuple[Raw, Raw]:
    """TFLite's GetReciprocal: (1 / x as Q0 of x shifted into [1, 2), the number of bits x was over one)."""
    x = np.asarray(x, np.int64)
    headroom_plus_one = count_leading_zeros(x)
    bits_over_unit = integer_digits - headroom_plus_one
    shifted_minus_one = wrap_int32(((x & 0xFFFFFFFF) << headroom_plus_one) - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), bits_over_unit
