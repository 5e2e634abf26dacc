"""TensorFlow Lite's fixed-point requantization, exactly as its reference kernels compute it
(tensorflow/lite/kernels/internal/common.h and quantization_util.cc, the default double-rounding
build): a real multiplier M becomes a 32-bit multiplier and a shift (`quantize_multiplier`), and
an int32 accumulator x is rescaled by SaturatingRoundingDoublingHighMul then RoundingDivideByPOT
(`multiply_by_quantized_multiplier`). Vectorized over numpy arrays in int64, where every
intermediate of the C code fits, and wrapping to int32 where the C code's int32 arithmetic would.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from core.frontend.tflite import SIGNED_UNIT_RANGE_OUTPUT, UNIT_RANGE_OUTPUT  # noqa: F401 (the schemes read them here)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def quantize_multiplier(multiplier: float) -> tuple[int, int]:
    """(quantized_multiplier, shift) with multiplier ~ quantized_multiplier * 2^(shift - 31),
    quantized_multiplier in [2^30, 2^31) (0 for 0): frexp's mantissa times 2^31 rounded half away
    from zero (TfLiteRound); a mantissa that rounds up to 2^31 halves and the shift grows; a shift
    below -31 flushes to zero, as QuantizeMultiplier does."""
    multiplier = float(multiplier)
    if not math.isfinite(multiplier) or multiplier < 0:
        raise ValueError(f"multiplier {multiplier}: a requantization multiplier is finite and >= 0")
    if multiplier == 0.0:
        return 0, 0
    mantissa, shift = math.frexp(multiplier)
    fixed = int(math.floor(mantissa * (1 << 31) + 0.5))  # mantissa > 0: half away from zero
    if fixed == 1 << 31:
        fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return fixed, shift


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul: the high 32 bits of 2ab, rounded to nearest (a
    half rounds toward +infinity); INT32_MIN * INT32_MIN (the one overflow) saturates to INT32_MAX.
    The C code adds 2^30 (1 - 2^30 below zero) and divides by 2^31 truncating; both signs come to
    (ab + 2^30) >> 31 with an arithmetic shift, one pass over the array."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    high = a * b
    high += np.int64(1 << 30)
    high >>= 31
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    if np.any(overflow):
        high = np.where(overflow, np.int64(INT32_MAX), high)
    return high


def rounding_divide_by_pot(x: np.ndarray, exponent) -> np.ndarray:
    """x / 2^exponent rounded to nearest, ties away from zero (gemmlowp's RoundingDivideByPOT): the C
    code's remainder test is (x + 2^(exponent - 1) - [x < 0]) >> exponent, for exponent >= 1."""
    x, exponent = np.asarray(x, np.int64), np.asarray(exponent, np.int64)
    below_zero = x >> 63  # -1 where x < 0, else 0
    if not np.all(exponent > 0):
        below_zero = np.where(exponent > 0, below_zero, 0)
    nudged = x + ((np.int64(1) << exponent) >> 1)
    nudged += below_zero
    nudged >>= exponent
    return nudged


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """x reduced to int32 as two's complement arithmetic would leave it."""
    return ((np.asarray(x, np.int64) + 2**31) % 2**32) - 2**31


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier, shift) -> np.ndarray:
    """MultiplyByQuantizedMultiplier(x, multiplier, shift): x * 2^max(shift, 0) (int32), the
    doubling high multiply, then a rounding right shift by max(-shift, 0). `multiplier` and
    `shift` broadcast against x (per channel: the last axis)."""
    shift = np.asarray(shift, np.int64)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    scaled = np.asarray(x, np.int64)
    if np.any(left):  # most layers scale down: no left shift, nothing to wrap
        scaled = wrap_int32(scaled << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(scaled, multiplier), right)


def multiply_by_quantized_multiplier_single_rounding(x: np.ndarray, multiplier, shift) -> np.ndarray:
    """x * multiplier * 2^(shift - 31) rounded once, half up, in 64 bits: (x * multiplier +
    2^(30 - shift)) >> (31 - shift), cast to int32 (a result beyond it wraps, as static_cast does): TFLite's
    single-rounding MultiplyByQuantizedMultiplier, what LiteRT's reference FULLY_CONNECTED computes (measured
    against it; its convolutions round twice)."""
    total = 31 - np.asarray(shift, np.int64)
    return wrap_int32((np.asarray(x, np.int64) * np.asarray(multiplier, np.int64) + (np.int64(1) << (total - 1))) >> total)


def multiply_by_quantized_multiplier_reduced(x: np.ndarray, multiplier, shift) -> np.ndarray:
    """The 64-bit MultiplyByQuantizedMultiplier(int64_t x, ...) of TFLite's 16x8 kernels (int16 activations' int64
    sums): the multiplier reduced to 16 bits, (multiplier + 2^15) >> 16 (0x7FFF from 0x7FFF0000 up), then one rounding
    of x * reduced + 2^(14 - shift) >> (15 - shift), cast to int32 (measured equal to LiteRT's reference and TFLM's
    CONV_2D on 16x8 files)."""
    multiplier = np.asarray(multiplier, np.int64)
    reduced = np.where(multiplier < 0x7FFF0000, (multiplier + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - np.asarray(shift, np.int64)
    return wrap_int32((np.asarray(x, np.int64) * reduced + (np.int64(1) << (total - 1))) >> total)


ROUNDINGS = {"double": multiply_by_quantized_multiplier, "single": multiply_by_quantized_multiplier_single_rounding,
             "reduced": multiply_by_quantized_multiplier_reduced}


def round_half_away(values):
    """To nearest, ties away from zero, as TfLiteRound and std::round: the + 1/2 in float64, exact for any
    float32 (in float32 it could round a value just below a half up)."""
    values = np.asarray(values, np.float64)
    return np.sign(values) * np.floor(np.abs(values) + 0.5)


@lru_cache(maxsize=None)
def libm(name: str, double: bool = False):
    """A float -> float function of the C math library (expf, tanhf; `double`: a double -> double one, erf), called as
    TFLite's kernels call it: numpy's exp may differ from it in the last bit."""
    function = getattr(ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6"), name)
    number = ctypes.c_double if double else ctypes.c_float
    function.restype, function.argtypes = number, [number]
    return function


def activation_range(activation: str, scale: float, zero_point: int, qmin: int = -128, qmax: int = 127) -> tuple[int, int]:
    """The int8 clamp of a fused activation (CalculateActivationRangeQuantized): its real bounds
    quantized as TFLite does, zero_point + round(bound / scale) with the division in float32."""
    def quantize(bound: float) -> int:
        return zero_point + int(round_half_away(np.float32(bound) / np.float32(scale)))
    bounds = {"NONE": (qmin, qmax), "RELU": (max(qmin, quantize(0.0)), qmax),
              "RELU6": (max(qmin, quantize(0.0)), min(qmax, quantize(6.0))),
              "RELU_N1_TO_1": (max(qmin, quantize(-1.0)), min(qmax, quantize(1.0)))}
    if activation not in bounds:
        raise ValueError(f"fused activation {activation}: the int8 kernels clamp {', '.join(bounds)}")
    return bounds[activation]


def requantize(accumulator: np.ndarray, multiplier, shift, zero_point: int, low: int, high: int, rounding: str = "double") -> np.ndarray:
    """int32 (int64: "reduced") accumulators to int8 (int16 where [low, high] is beyond int8): rescaled by (multiplier,
    shift) with `rounding` (ROUNDINGS), plus the output zero point, clamped to [low, high] (the activation's range)."""
    scaled = ROUNDINGS[rounding](accumulator, multiplier, shift) + zero_point
    return np.clip(scaled, low, high).astype(np.int8 if -128 <= low and high <= 127 else np.int16)


def requantize_int8(values: np.ndarray, input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int) -> np.ndarray:
    """int8 -> int8 at another scale and zero point as TFLite's QUANTIZE (requantize): (q - input zero point) by the
    multiplier of the float32 scales' ratio (in double), plus the output zero point, saturated."""
    multiplier, shift = quantize_multiplier(float(np.float32(input_scale)) / float(np.float32(output_scale)))
    return requantize(np.asarray(values, np.int64) - input_zero_point, multiplier, shift, output_zero_point, -128, 127)


def affine_quantize(values: np.ndarray, scale: float, zero_point: int, bits: int = 8) -> np.ndarray:
    """float32 -> int8 (int16 with `bits` 16) as TFLite's reference QUANTIZE (AffineQuantize): round(x / scale) half
    away from zero, the quotient in double, plus the zero point, saturated."""
    quotient = np.asarray(values, np.float32).astype(np.float64) / float(np.float32(scale))
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return np.clip(round_half_away(quotient) + zero_point, low, high).astype(np.int16 if bits == 16 else np.int8)


def dequantize(values: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """int8 -> float32 as TFLite's reference DEQUANTIZE: scale x (q - zero point) in double, then float."""
    return (float(np.float32(scale)) * (np.asarray(values, np.int64) - zero_point)).astype(np.float32)


# --- int16 lookup tables (common.h: LUTPopulateInt16, LUTLookup): what 16x8 kernels read a function from ------------------

LUT_STEPS = 512  # a 16x8 table's intervals: the input's high 9 bits index it, the low 7 interpolate
LUT_TYPES: dict[str, Callable[[Any], Any]] = {"double": np.float64, "float": np.float32}  # the arithmetic a table is generated in (FloatT)


def lut_populate_int16(transform, input_min: float, input_max: float, output_min: float, output_max: float,
                       precision: str = "float") -> np.ndarray:
    """int16 [513] (held in int64): LUTPopulateInt16<FloatT> of `transform` (called with FloatT values, returning them, as
    the C function computes) over [input_min, input_max] onto the 65536 steps of [output_min, output_max]: 512 samples,
    each less half its interpolation's error at the interval's midpoint, and the end point for the last slope; every
    step in `precision`'s type (LUT_TYPES), rounded half away from zero (TfLiteRound), clamped to int16."""
    real = LUT_TYPES[precision]
    step = (real(input_max) - real(input_min)) / real(LUT_STEPS)
    half_step = step / real(2)
    scaling = real(65536) / (real(output_max) - real(output_min))

    def rounded(value):
        return real(np.sign(value) * np.floor(np.abs(value) + real(0.5)))

    def clamped(value) -> int:
        return int(min(max(value, real(-32768)), real(32767)))

    table = np.empty(LUT_STEPS + 1, np.int64)
    for i in range(LUT_STEPS):
        start = real(input_min) + real(i) * step
        value, midpoint, following = transform(start), transform(start + half_step), transform(real(input_min) + real(i + 1) * step)
        interpolated = rounded((following * scaling + rounded(value * scaling)) / real(2))
        bias = rounded((interpolated - rounded(midpoint * scaling)) / real(2))
        table[i] = clamped(rounded(value * scaling) - bias)
    table[LUT_STEPS] = clamped(rounded(transform(real(input_max)) * scaling))
    return table


def lut_populate_int16_at(transform, input_scale: float, output_scale: float, precision: str = "float") -> np.ndarray:
    """The table LUTPopulate<int16_t> fills for an operator of symmetric int16 input and output (zero points 0, as the
    16x8 mode has them): the input's and the output's ranges in `precision`'s type, from their scales."""
    real = LUT_TYPES[precision]
    input_scale, output_scale = real(input_scale), real(output_scale)
    return lut_populate_int16(transform, input_scale * real(-32768), input_scale * real(32767), output_scale * real(-32768),
                              output_scale * real(32767), precision)


def lut_lookup_int16(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """LUTLookup of int16 `values` (int64 out): the entry at 256 + (value >> 7), plus its slope (an int16, as the kernel
    holds it) times the low 7 bits, rounded; the sum an int16."""
    values = np.asarray(values, np.int64)
    index = 256 + (values >> 7)
    table = np.asarray(table, np.int64)
    base = table[index]
    slope = (table[index + 1] - base).astype(np.int16).astype(np.int64)
    return (base + ((slope * (values & 0x7F) + 64) >> 7)).astype(np.int16).astype(np.int64)
