"""TFLite's requantization arithmetic (core/quantize/tflite_math.py) against a second, scalar
transcription of the C code in Python integers, at the extremes the issue names: multipliers near
2^31, shifts 0 and 31 either way, accumulators at INT32_MIN/INT32_MAX, zero points -128 and 127."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.quantize.tflite_compiled import requantize_channels
from core.quantize.tflite_math import (INT32_MAX, INT32_MIN, multiply_by_quantized_multiplier, quantize_multiplier,
                                       rounding_divide_by_pot, saturating_rounding_doubling_high_mul)


def _c_div(a: int, b: int) -> int:  # C's integer division: toward zero
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def _to_int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def srdhm(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return _c_div(ab + nudge, 1 << 31)


def rdbpot(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def mbqm(x: int, multiplier: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return rdbpot(srdhm(_to_int32(x * (1 << left)), multiplier), right)


EXTREME_X = [INT32_MIN, INT32_MIN + 1, -(2**30), -65536, -3, -2, -1, 0, 1, 2, 3, 65535, 2**30, INT32_MAX - 1, INT32_MAX]
EXTREME_M = [0, 1, 2**30, 2**30 + 1, 2**31 - 2, INT32_MAX, INT32_MIN, -1]


def test_the_doubling_high_multiply_matches_the_c_code_at_its_extremes_and_at_random():
    rng = np.random.default_rng(0)
    a = np.array(EXTREME_X + list(rng.integers(INT32_MIN, INT32_MAX, 2000, endpoint=True)), np.int64)
    b = np.array(EXTREME_M + list(rng.integers(INT32_MIN, INT32_MAX, a.size - len(EXTREME_M), endpoint=True)), np.int64)
    for first, second in ((a, b), (a[:, None], np.array(EXTREME_M)[None, :])):
        got = saturating_rounding_doubling_high_mul(first, second)
        expected = np.vectorize(srdhm, otypes=[np.int64])(*np.broadcast_arrays(first, second))
        np.testing.assert_array_equal(got, expected)
    assert saturating_rounding_doubling_high_mul(INT32_MIN, INT32_MIN) == INT32_MAX


@pytest.mark.parametrize("exponent", [0, 1, 2, 15, 30, 31])
def test_rounding_divide_by_a_power_of_two_rounds_half_away_from_zero(exponent):
    rng = np.random.default_rng(exponent)
    x = np.array(EXTREME_X + list(rng.integers(INT32_MIN, INT32_MAX, 2000, endpoint=True)), np.int64)
    np.testing.assert_array_equal(rounding_divide_by_pot(x, exponent), [rdbpot(int(v), exponent) for v in x])
    if exponent:
        half = 1 << (exponent - 1)
        assert rounding_divide_by_pot(half, exponent) == 1 and rounding_divide_by_pot(-half, exponent) == -1


@pytest.mark.parametrize("shift", [-31, -30, -8, -1, 0, 1, 5, 31])
def test_requantization_matches_the_c_code_for_every_shift_and_multiplier(shift):
    rng = np.random.default_rng(shift + 100)
    x = np.array(EXTREME_X + list(rng.integers(INT32_MIN, INT32_MAX, 500, endpoint=True)), np.int64)
    multipliers = np.array([2**30, 2**30 + 1, INT32_MAX - 1, INT32_MAX, *rng.integers(2**30, 2**31, 4)], np.int64)
    got = multiply_by_quantized_multiplier(x[:, None], multipliers[None, :], shift)
    expected = [[mbqm(int(v), int(m), shift) for m in multipliers] for v in x]
    np.testing.assert_array_equal(got, expected)


def test_per_channel_multipliers_and_shifts_broadcast_along_the_last_axis():
    x = np.arange(-600, 600, 7, dtype=np.int64).reshape(-1, 4)
    multipliers, shifts = np.array([2**30, 1518500250, INT32_MAX, 1 << 30]), np.array([0, -7, -31, 3])
    expected = [[mbqm(int(v), int(multipliers[c]), int(shifts[c])) for c, v in enumerate(row)] for row in x]
    np.testing.assert_array_equal(multiply_by_quantized_multiplier(x, multipliers, shifts), expected)


@pytest.mark.parametrize("real", [1e-12, 2.0**-40, 2.0**-32, 0.0003, 0.49999999, 0.5, 0.75, 0.9999999999, 1.0, 1.5, 2.0**20 + 1])
def test_a_multiplier_is_a_mantissa_in_two_to_the_30_and_31_and_a_shift(real):
    quantized, shift = quantize_multiplier(real)
    if quantized == 0:  # flushed: the shift would be below -31
        assert real < 2.0**-31 and shift == 0
        return
    assert 2**30 <= quantized <= INT32_MAX
    # within half a unit of the 31-bit mantissa, as rounding half away from zero leaves it
    assert abs(quantized * 2.0 ** (shift - 31) - real) <= 2.0 ** (shift - 32) * (1 + 1e-12)
    mantissa, exponent = math.frexp(real)
    assert shift == exponent or (shift == exponent + 1 and quantized == 2**30)


def test_a_mantissa_that_rounds_up_to_two_to_the_31_halves():
    assert quantize_multiplier(1.0 - 2.0**-40) == (2**30, 1)


def test_a_negative_or_non_finite_multiplier_is_refused():
    for bad in (-0.5, math.inf, math.nan):
        with pytest.raises(ValueError, match="multiplier"):
            quantize_multiplier(bad)


@pytest.mark.parametrize("shift", [-31, -20, -1, 0, 1, 7, 30])
def test_the_compiled_requantization_is_the_c_codes_at_the_extremes(shift):
    """requantize_channels (compiled, one pass) against the scalar transcription, accumulators and biases at
    int32's ends, multipliers at theirs, zero points -128 and 127, every clamp."""
    multipliers = np.array([m for m in EXTREME_M if m >= 0], np.int64)
    accumulators = np.array(EXTREME_X, np.int64)[:, None].repeat(len(multipliers), axis=1)
    for zero_point, (low, high) in ((-128, (-128, 127)), (127, (-128, 127)), (3, (-20, 90))):
        bias = np.zeros(len(multipliers), np.int64)
        got = requantize_channels(accumulators.astype(np.float64), bias, multipliers, np.full(len(multipliers), shift), zero_point, low, high)
        expected = [[min(max(mbqm(int(x), int(m), shift) + zero_point, low), high) for m in multipliers] for x in EXTREME_X]
        assert got.tolist() == expected
    rng = np.random.default_rng(shift + 40)
    sums, bias = rng.integers(-(2**24), 2**24, (64, 5)), rng.integers(-(2**20), 2**20, 5)
    channel_multipliers, channel_shifts = rng.integers(2**30, 2**31, 5), np.array([shift, -3, 0, 2, -10])
    got = requantize_channels(sums.astype(np.float32), bias, channel_multipliers, channel_shifts, -5, -128, 127)
    expected = [[min(max(mbqm(int(x) + int(b), int(m), int(s)) - 5, -128), 127) for x, b, m, s in zip(row, bias, channel_multipliers,
                                                                                                 channel_shifts)] for row in sums]
    assert got.tolist() == expected
