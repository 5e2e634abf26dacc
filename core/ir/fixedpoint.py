"""The fixed-point arithmetic of the TF2IR hardware (seed 000), written once: the integer
ranges, rounding shifts, saturation, FakeQuant's rounding of constants, real <-> int8, and
the bound an accumulator must hold. Every kernel, emitter and check uses these; the C
runtime (core/backends/c/runtime/qt_runtime.h) is their C transcription.

Rounding is half up everywhere (towards +inf: 2.5 -> 3, -2.5 -> -2), as TensorFlow's
FakeQuant rounds, and right shifts are arithmetic (floor)."""

from __future__ import annotations

import numpy as np

from core.quantize.grid import Pow2Grid

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT8_PRODUCT_MAX = 128 * 128  # |int8 x int8| <= 2^14: (-128) x (-128)

# Exactness of float32 arithmetic: every integer of magnitude <= 2^24 (times any power of two)
# is a float32. A dot product of K int8 pairs, and every partial sum of it in whatever order a
# BLAS adds, is an integer of magnitude <= K * 2^14, so a float32 GEMM computes it exactly while
# K * 2^14 <= 2^24: K <= GEMM_MAX_K = 1024. Longer reductions are split into chunks of at most
# GEMM_MAX_K, each exact, whose results are added in int32 (int64 where int32 could overflow).
FLOAT32_EXACT_INT = 2**24
GEMM_MAX_K = FLOAT32_EXACT_INT // INT8_PRODUCT_MAX  # 1024
if GEMM_MAX_K * INT8_PRODUCT_MAX > FLOAT32_EXACT_INT:  # pragma: no cover  (the bound, stated as code)
    raise AssertionError("GEMM_MAX_K int8 products can exceed float32's exact integers")


def round_shift(values, shift: int) -> np.ndarray:
    """values * 2^-shift as integers (int64): shift > 0 is an arithmetic right shift with
    round-half-up, floor(v / 2^shift + 1/2) = (v + 2^(shift-1)) >> shift (so -2.5 -> -2,
    2.5 -> 3); shift <= 0 is an exact left shift by -shift. No saturation here."""
    values = np.asarray(values, dtype=np.int64)
    shift = int(shift)
    if shift > 0:
        return (values + (1 << (shift - 1))) >> shift
    return values << -shift


def round_half_away_shift(values, shift: int) -> np.ndarray:
    """values / 2^shift (shift > 0) rounded to nearest, ties away from zero: C's truncating division of
    values +- 2^(shift - 1), as TFLite's integer kernels round."""
    values = np.asarray(values, dtype=np.int64)
    half = np.int64(1) << (shift - 1)
    rounded = values + np.where(values > 0, half, -half)
    return np.where(rounded >= 0, rounded >> shift, -((-rounded) >> shift))


def rounding_constant(shift: int) -> int:
    """What a rounding right shift by `shift` adds first: 2^(shift - 1), or 0 for no shift."""
    return 1 << (shift - 1) if shift > 0 else 0


def saturate(values) -> np.ndarray:
    """Clamp to [-128, 127] and store as int8 (the result's only saturation)."""
    return np.clip(values, INT8_MIN, INT8_MAX).astype(np.int8)


def relu6_limit(log2scale: int) -> int:
    """Relu6's upper clamp at the output scale: floor(6 * 2^log2scale + 1/2), exactly:
    6 * 2^log2scale for log2scale >= -1, its round half up below."""
    if log2scale >= 0:
        return 6 << log2scale
    return (6 + (1 << (-log2scale - 1))) >> -log2scale


def quantize(values: np.ndarray, log2scale: int) -> np.ndarray:
    """real -> int8 at 2^-log2scale: round half up (as FakeQuant does), saturate."""
    return Pow2Grid(log2scale).quantize(values)


def dequantize(values: np.ndarray, log2scale: int) -> np.ndarray:
    return Pow2Grid(log2scale).dequantize(values)


def accumulator_bound(weight_magnitudes, bias, bias_shift: int, output_shift: int) -> int:
    """The largest magnitude an accumulator reaches for any int8 input: over the output
    channels, sum |w| x 128 (every partial sum of the products is bounded by it, in any order)
    plus |bias| << bias_shift, plus the rounding constant of the output shift.

    `weight_magnitudes`: per output channel, the sum of |w| over its reduction (for any int8
    weights: reduction x 128). `bias`: per output channel |bias| (any int8 bias: 128), or None
    without one. Arrays broadcast: a scalar stands for every channel."""
    products = np.asarray(weight_magnitudes, dtype=np.int64) * 128
    bias_term = np.left_shift(np.abs(np.asarray(bias, dtype=np.int64)), bias_shift) if bias is not None else 0
    return int(np.max(products + bias_term, initial=0)) + rounding_constant(output_shift)
