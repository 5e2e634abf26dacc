"""Element-wise functions on the tflite_int8 scheme as TFLite's reference kernels compute them for int8.
LOGISTIC and TANH, two ways (the runtime says which, core/quantize/runtimes.py): LiteRT's PopulateLookupTable,
a 256-entry table, each entry the C library's float32 function (expf, tanhf, called as the kernels call them)
of input_scale x (q - input zero point), times 1 / output_scale, rounded half away from zero, plus the output
zero point, saturated (GELU's too: GeluTransform, 0.5 x (1 + erf(x / sqrt(2))) with erf in double, or under
`approximate` GeluTransformApproximate, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) in float32); or TFLite
Micro's reference_integer_ops::Logistic / Tanh, in gemmlowp fixed point: the input less its zero point rescaled onto
Q4.27 by a multiplier from frexp (inputs beyond the radius that Q4 holds saturate), gemmlowp's logistic or tanh in
Q0, rounded down to the output's 1/256 (zero point -128) or 1/128. HARD_SWISH (reference_ops::HardSwish) in 16-bit
fixed point: the input on a scale 2^7 finer, a rounding doubling high multiply onto the output scale, a "relu-ish"
factor in [0, 1] from the input rescaled so that 3.0 is 2^15, the two multiplied by the truncating doubling high
multiply, then a rounding right shift. LEAKY_RELU (reference_ops::QuantizeLeakyRelu): two requantizations, the
identity's for x >= 0 and alpha's below, their multipliers from float32 ratios of the scales."""

from __future__ import annotations

import numpy as np

import math

from core.quantize import gemmlowp
from core.quantize.tflite_math import (INT32_MAX, libm, multiply_by_quantized_multiplier, quantize_multiplier, round_half_away,
                                       rounding_divide_by_pot)


def _logistic(value: np.float32) -> np.float32:
    return np.float32(1.0) / (np.float32(1.0) + np.float32(libm("expf")(float(-value))))


def _exp(value: np.float32) -> np.float32:
    return np.float32(libm("expf")(float(value)))


def _tanh(value: np.float32) -> np.float32:
    return np.float32(libm("tanhf")(float(value)))


NEGATIVE_SQRT1_2 = np.float32(-math.sqrt(0.5))  # static_cast<float>(-M_SQRT1_2)


def _gelu(value: np.float32) -> np.float32:
    """reference_ops::GeluTransform: 0.5f * x * std::erfc(x * static_cast<float>(-M_SQRT1_2)), all in float32 (erfcf).
    (The form 0.5 x (1 + erf(x / sqrt 2)) in double gives the same int8 tables, and one of six 16x8 tables of
    tests/test_conformance.py's seeds one entry off LiteRT's.)"""
    return np.float32(np.float32(np.float32(0.5) * value) * np.float32(libm("erfcf")(float(np.float32(value * NEGATIVE_SQRT1_2)))))


SQRT_2_OVER_PI = np.float32(2 / math.sqrt(math.pi) * math.sqrt(0.5))  # gelu_internal::kSqrt2dPi, M_2_SQRTPI * M_SQRT1_2


def _gelu_tanh(value: np.float32) -> np.float32:
    """reference_ops::GeluTransformApproximate: 0.5f * x * (1.f + std::tanh(kSqrt2dPi * (x + 0.044715f * x * x * x))),
    all in float32 (tanhf)."""
    cubic = np.float32(np.float32(np.float32(np.float32(0.044715) * value) * value) * value)
    inner = np.float32(SQRT_2_OVER_PI * np.float32(value + cubic))
    return np.float32(np.float32(np.float32(0.5) * value) * np.float32(np.float32(1.0) + np.float32(libm("tanhf")(float(inner)))))


FUNCTIONS = {"LOGISTIC": _logistic, "TANH": _tanh, "EXP": _exp, "GELU": _gelu, "GELU_TANH": _gelu_tanh}


def lookup_table(function: str, input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int) -> np.ndarray:
    """int8 table indexed by q + 128."""
    inverse = np.float32(1.0) / np.float32(output_scale)
    table = []
    for q in range(-128, 128):
        transformed = FUNCTIONS[function](np.float32(input_scale) * np.float32(q - input_zero_point))
        with np.errstate(over="ignore", invalid="ignore"):  # float32's infinity, as C's float arithmetic gives it
            scaled = np.float32(transformed * inverse)
        rounded = np.float32(round_half_away(scaled))
        table.append(_clamped(np.float32(rounded + np.float32(output_zero_point))))
    return np.asarray(table, np.int8)


def _clamped(value: np.float32) -> int:
    """The int8 a rescaled value is: clamped to [-128, 127] before it is made an integer, so a value past int32's range
    or an infinity (a huge input scale's exp) is the range's end, as LiteRT's table has it."""
    return int(min(max(float(value), -128.0), 127.0))


INPUT_INTEGER_BITS = 4  # Q4.27: the fixed-point functions' input
# (output bits below Q0's 31, output zero point) of the fixed-point kernels, which assume TFLite's fixed output
FIXED_POINT_OUTPUTS = {"LOGISTIC": (31 - 8, -128), "TANH": (31 - 7, 0)}
FIXED_POINT_FUNCTIONS = {"LOGISTIC": gemmlowp.logistic, "TANH": gemmlowp.tanh}


def fixed_point_table(function: str, input_scale: float, input_zero_point: int) -> np.ndarray:
    """int8 table indexed by q + 128 of reference_integer_ops::Logistic or Tanh (TFLite Micro's LogisticPrepare /
    TanhPrepare: input_scale x 2^27 as frexp's mantissa rounded to 31 bits and its exponent, the left shift; the
    radius CalculateInputRadius(4, shift))."""
    mantissa, left_shift = math.frexp(float(np.float32(input_scale)) * (1 << (31 - INPUT_INTEGER_BITS)))
    multiplier = int(round_half_away(mantissa * (1 << 31)))
    radius = math.floor(((1 << INPUT_INTEGER_BITS) - 1) * (1 << (31 - INPUT_INTEGER_BITS)) * 2.0 ** -left_shift)
    centred = np.arange(-128, 128, dtype=np.int64) - input_zero_point
    inside = np.clip(centred, -radius + 1, radius - 1)  # beyond the radius the kernel saturates without multiplying
    fixed = FIXED_POINT_FUNCTIONS[function](multiply_by_quantized_multiplier(inside, multiplier, left_shift), INPUT_INTEGER_BITS)
    bits, zero_point = FIXED_POINT_OUTPUTS[function]
    outputs = np.clip(rounding_divide_by_pot(fixed, bits) + zero_point, -128, 127)
    return np.where(centred <= -radius, -128, np.where(centred >= radius, 127, outputs)).astype(np.int8)



INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1


def int16_multiplier(multiplier: float) -> tuple[int, int]:
    """(16-bit fixed-point multiplier, exponent): QuantizeMultiplier's 32-bit one rounded to its high 16 bits
    (DownScaleInt32ToInt16Multiplier, saturating at INT16_MAX)."""
    fixed, exponent = quantize_multiplier(multiplier)
    if fixed >= 2**31 - 1 - (1 << 15):
        return INT16_MAX, exponent
    return (fixed + (1 << 15)) >> 16, exponent


def _rounding_doubling_high_mul_16(a: np.ndarray, b) -> np.ndarray:
    """gemmlowp's 16-bit SaturatingRoundingDoublingHighMul: 2ab's high 16 bits, ties away from zero."""
    product = np.asarray(a, np.int64) * np.int64(b)
    total = product + np.where(product >= 0, 1 << 14, 1 - (1 << 14))
    high = np.where(total >= 0, total >> 15, -((-total) >> 15))  # C's division truncates
    return np.where((np.asarray(a) == INT16_MIN) & (b == INT16_MIN), INT16_MAX, high)


def _doubling_high_mul_16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SaturatingDoublingHighMul: the same, truncated toward zero (ARM's SQDMULH)."""
    product = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    high = np.where(product >= 0, product >> 15, -((-product) >> 15))
    return np.where((np.asarray(a) == INT16_MIN) & (np.asarray(b) == INT16_MIN), INT16_MAX, high)


def _saturating_left_shift_16(value: np.ndarray, amount: int) -> np.ndarray:
    return np.clip(np.asarray(value, np.int64) << amount, INT16_MIN, INT16_MAX)


def hard_swish_parameters(input_scale: float, output_scale: float) -> dict[str, int]:
    """HardSwishPrepare: the scales' ratios in float32, then 16-bit multipliers."""
    hires_input_scale = np.float32(1.0 / 128.0) * np.float32(input_scale)
    output_fixed, output_exponent = int16_multiplier(float(hires_input_scale / np.float32(output_scale)))
    reluish_fixed, reluish_exponent = int16_multiplier(float(hires_input_scale / np.float32(3.0 / 32768.0)))
    if output_exponent > 0:
        raise ValueError(f"hard-swish: output scale {output_scale} is finer than input scale / 128 allows (TFLite requires it)")
    return {"output_multiplier": output_fixed, "output_exponent": output_exponent,
            "reluish_multiplier": reluish_fixed, "reluish_exponent": reluish_exponent}


def hard_swish_affine(inputs: np.ndarray, input_zero_point: int, output_zero_point: int, parameters: dict[str, int]) -> np.ndarray:
    hires = (inputs.astype(np.int64) - input_zero_point) * (1 << 7)
    on_output_scale = _rounding_doubling_high_mul_16(hires, parameters["output_multiplier"])
    reluish, exponent = hires, parameters["reluish_exponent"]
    if exponent > 0:  # all but the last bit of a left shift first: any saturation then happens at the last bit
        reluish = _saturating_left_shift_16(reluish, exponent - 1)
    reluish = _rounding_doubling_high_mul_16(reluish, parameters["reluish_multiplier"])
    if exponent > 0:
        reluish = _saturating_left_shift_16(reluish, 1)
    if exponent < 0:
        reluish = rounding_divide_by_pot(reluish, -exponent)
    reluish = (reluish + (1 << 15)) >> 1  # [-1, 1] -> [0, 1]
    output = rounding_divide_by_pot(_doubling_high_mul_16(reluish, on_output_scale), -parameters["output_exponent"])
    return np.clip(output + output_zero_point, -128, 127).astype(np.int8)


def leaky_relu_parameters(input_scale: float, output_scale: float, alpha: float) -> tuple[tuple[int, int], tuple[int, int]]:
    """((identity multiplier, shift), (alpha multiplier, shift)) as LeakyReluPrepare computes them, in float32."""
    input_scale, output_scale = np.float32(input_scale), np.float32(output_scale)
    alpha_multiplier = float(input_scale * np.float32(alpha) / output_scale)
    return quantize_multiplier(float(input_scale / output_scale)), quantize_multiplier(alpha_multiplier)


def leaky_relu_affine(inputs: np.ndarray, input_zero_point: int, output_zero_point: int, identity: tuple[int, int],
                      alpha: tuple[int, int]) -> np.ndarray:
    centred = inputs.astype(np.int64) - input_zero_point
    scaled = np.where(centred >= 0, multiply_by_quantized_multiplier(centred, *identity), multiply_by_quantized_multiplier(centred, *alpha))
    return np.clip(scaled + output_zero_point, -128, 127).astype(np.int8)


RSQRT_SHIFT = 20  # elementwise.cc's kShift: 1 / sqrt(value) held as an integer scaled by 2^20
HALF_SQRT_2 = 1518500250  # sqrt(2) / 2 in Q0.31
NORMALIZED_BITS = 29  # the input is brought below 2^29 by pairs of bits


def inv_sqrt_quantized_multiplier_exp(values) -> tuple[np.ndarray, np.ndarray]:
    """GetInvSqrtQuantizedMultiplierExp(value, kReverseShift) of each of `values` (int32): (multiplier, left shift) of
    1 / sqrt(value), by five Newton-Raphson steps in gemmlowp's Q3.28 from x = 1 on the value normalized to [2^27, 2^29)
    by pairs of bits; a value at or below 1 gives (INT32_MAX, 0)."""
    values = np.asarray(values, np.int64)
    small = values <= 1
    value = np.where(small, 2, values)
    length = np.frexp(value.astype(np.float64))[1].astype(np.int64)  # bit length, exact below 2^53
    halvings = np.maximum(length - (NORMALIZED_BITS - 1), 0) // 2  # `while (input >= 2^29) input /= 4`
    value, shift = value >> (2 * halvings), 11 + halvings
    length = np.frexp(value.astype(np.float64))[1].astype(np.int64)
    pairs = ((32 - length) - 1) // 2 - 1  # (CountLeadingZeros - 1) / 2 - 1: at least 0 below 2^29
    shift, value = shift - pairs, value << (2 * pairs)
    half_input = gemmlowp.saturating_rounding_multiply_by_pot(value >> 1, -1)
    half_three, x = (1 << 28) + (1 << 27), np.full(value.shape, gemmlowp.one(3), np.int64)
    for _ in range(5):
        cube = gemmlowp.rescale(gemmlowp.srdhm(gemmlowp.srdhm(x, x), x), 9, 3)
        x = gemmlowp.rescale(gemmlowp.sub(gemmlowp.srdhm(half_three, x), gemmlowp.srdhm(half_input, cube)), 6, 3)
    inverse = gemmlowp.srdhm(x, HALF_SQRT_2)
    inverse, shift = np.where(shift < 0, inverse << np.maximum(-shift, 0), inverse), np.maximum(shift, 0)
    return np.where(small, INT32_MAX, inverse), np.where(small, 0, -shift)


def rsqrt_multiplier(input_scale: float, output_scale: float, precision: str) -> tuple[int, int]:
    """RSQRT's output multiplier 1 / (sqrt(input_scale) x output_scale) as a Q31 multiplier and a shift, the square root
    and the product of the float32 scales in float32 (LiteRT's elementwise.cc) or in double (TFLite Micro's, measured on
    the pinned interpreter: Runtime.scale_product_precision), the reciprocal in double."""
    if precision == "float":
        return quantize_multiplier(1.0 / float(np.float32(np.sqrt(np.float32(input_scale))) * np.float32(output_scale)))
    return quantize_multiplier(1.0 / (math.sqrt(float(np.float32(input_scale))) * float(np.float32(output_scale))))


def rsqrt_fixed_point(centred, multiplier: int, shift: int, output_zero_point: int, low: int, high: int) -> np.ndarray:
    """RsqrtEvalQuantized of each input less its zero point: 1 / sqrt(value) as an integer scaled by 2^20, requantized by
    the output multiplier less those 20 bits, plus the output zero point, clamped to [low, high]; a value of 0 gives
    `high`. A negative value (refused by the runtimes when they run) computes as 1 does."""
    centred = np.asarray(centred, np.int64)
    inverse, inverse_shift = inv_sqrt_quantized_multiplier_exp(centred)
    scaled = multiply_by_quantized_multiplier(np.ones_like(centred), inverse, inverse_shift + RSQRT_SHIFT)
    output = multiply_by_quantized_multiplier(scaled, multiplier, shift - RSQRT_SHIFT) + output_zero_point
    return np.where(centred == 0, high, np.clip(output, low, high))


def rsqrt_table(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int, precision: str) -> np.ndarray:
    """int8 table indexed by q + 128 of TFLite's int8 RSQRT (elementwise.cc RsqrtEvalQuantized, rsqrt_fixed_point) at the
    runtime's multiplier precision; the input's zero point itself gives 127. Inputs below the zero point (negative reals)
    are refused by LiteRT at run time; the table holds what TFLite Micro computes for them."""
    multiplier, shift = rsqrt_multiplier(input_scale, output_scale, precision)
    return rsqrt_fixed_point(np.arange(-128, 128) - input_zero_point, multiplier, shift, output_zero_point, -128, 127).astype(np.int8)
