"""softmax on the tflite_int8 scheme, as TFLite's reference kernels compute it for int8 (reference_ops::Softmax,
what LiteRT's BUILTIN_REF resolver and TFLite Micro both run): gemmlowp fixed point throughout. Each input's
difference from its row's maximum d <= 0 is rescaled by input_scale x beta onto Q5.26 (a multiplier and a left
shift, PreprocessSoftmaxScaling); differences below diff_min (CalculateInputRadius) count as exp = 0; exp of
the rest in Q0 (exp_on_negative_values); their sum in Q12.19 (each term rounded by 2^-12); its reciprocal
(GetReciprocal: 1 / (1 + x) by Newton-Raphson on the sum shifted into [1, 2)); each output the reciprocal
times its exp, rounded by 2^-(bits over one + 23), less 128, saturated: an output at scale 1/256, zero point
-128, which TFLite requires of an int8 softmax.

The exp of a difference depends on the difference alone, and an int8 row's differences are 0..255: the
kernel and the generated C read a 256-entry int32 table of it (exp_table); what is left per row is integer
arithmetic. (TFLite's optimized float table, PopulateSoftmaxLookupTable, agrees with this on almost every
row and not on all: 1 LSB on 0.01% of ResNet-8's outputs.)"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from core.quantize import gemmlowp
from core.quantize.tflite_math import (libm, lut_lookup_int16, lut_populate_int16, multiply_by_quantized_multiplier,
                                      quantize_multiplier, rounding_divide_by_pot, saturating_rounding_doubling_high_mul, wrap_int32)

SCALED_DIFF_INTEGER_BITS = 5  # Q5.26: the exp's input
ACCUMULATION_INTEGER_BITS = 12  # Q12.19: the sum of the exps
OUTPUT_SCALE, OUTPUT_ZERO_POINT = 1.0 / 256, -128  # what TFLite requires of an int8 softmax's output


@dataclass(frozen=True)
class SoftmaxScaling:
    """CalculateSoftmaxParams for int8: the difference's multiplier and left shift onto Q5.26, and diff_min."""

    input_multiplier: int
    input_left_shift: int
    diff_min: int

    @classmethod
    def of(cls, input_scale: float, beta: float) -> "SoftmaxScaling":
        """PreprocessSoftmaxScaling: beta x input_scale x 2^26 (the file's float32 values in double), at most
        2^31 - 1, as a multiplier above one; diff_min = -floor((2^5 - 1) x 2^26 / 2^left_shift)."""
        real = min(float(np.float32(beta)) * float(np.float32(input_scale)) * (1 << (31 - SCALED_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
        multiplier, left_shift = quantize_multiplier(real)
        radius = ((1 << SCALED_DIFF_INTEGER_BITS) - 1) * (1 << (31 - SCALED_DIFF_INTEGER_BITS)) / (1 << left_shift)
        return cls(multiplier, left_shift, -int(math.floor(radius)))


def exp_table(scaling: SoftmaxScaling) -> np.ndarray:
    """int32 [256]: exp of the difference -d in Q0 for d = 0..255, -1 where -d < diff_min (the kernel skips it)."""
    differences = -np.arange(256, dtype=np.int64)
    counted = np.maximum(differences, scaling.diff_min)  # the skipped ones would overflow the C code's int32 shift
    rescaled = saturating_rounding_doubling_high_mul(counted << scaling.input_left_shift, scaling.input_multiplier)
    exps = gemmlowp.exp_on_negative_values(rescaled, SCALED_DIFF_INTEGER_BITS)
    return np.where(differences >= scaling.diff_min, exps, -1).astype(np.int32)


def softmax_affine(inputs: np.ndarray, table: np.ndarray) -> np.ndarray:
    """int8 [..., D] -> int8 [..., D] along the last axis; `table` is exp_table's."""
    rows = inputs.reshape(-1, inputs.shape[-1]).astype(np.int64)
    exps = table.astype(np.int64)[rows.max(axis=1, keepdims=True) - rows]
    counted = exps >= 0
    exps = np.where(counted, exps, 0)
    total = wrap_int32(rounding_divide_by_pot(exps, ACCUMULATION_INTEGER_BITS).sum(axis=1))  # FixedPoint<int32, 12> adds wrap
    reciprocal, bits_over_unit = gemmlowp.get_reciprocal(total, ACCUMULATION_INTEGER_BITS)
    scaled = rounding_divide_by_pot(saturating_rounding_doubling_high_mul(reciprocal[:, None], exps), (bits_over_unit + 31 - 8)[:, None])
    outputs = np.where(counted, np.clip(scaled + OUTPUT_ZERO_POINT, -128, 127), -128)
    return outputs.astype(np.int8).reshape(inputs.shape)


@lru_cache(maxsize=64)
def softmax_exp_table(input_scale: float, beta: float) -> np.ndarray:
    """exp_table of a layer's scaling, read-only: the kernel and the C emitter share it."""
    table = exp_table(SoftmaxScaling.of(input_scale, beta))
    table.setflags(write=False)
    return table


# --- int16 (TFLite's 16x8 mode: reference_ops::SoftmaxInt16, on LiteRT's and TFLite Micro's kernels alike) ----------

INT16_OUTPUT_SCALE, INT16_OUTPUT_ZERO_POINT = 1.0 / 32768, 0  # what TFLite requires of an int16 softmax's output
EXP_RANGE = 10.0  # the exp table spans [-10, 0]: a difference of 65535 steps is mapped onto it
LUT_FUNCTIONS = {  # exp on [-10, 0] and 1 / (1 + x) on [0, 1], as each precision's C computes them
    "double": (lambda x: np.float64(math.exp(x)), lambda x: np.float64(1.0) / (np.float64(1.0) + x)),
    "float": (lambda x: np.float32(libm("expf")(float(x))), lambda x: np.float32(1.0) / (np.float32(1.0) + x)),
}


@lru_cache(maxsize=2)
def int16_luts(precision: str = "double") -> tuple[np.ndarray, np.ndarray]:
    """(exp on [-10, 0], 1 / (1 + x) on [0, 1]): the tables SoftmaxPrepare generates for int16 (gen_lut, LUTPopulateInt16's
    arithmetic onto the output range [-1, 1]), in `precision` (LiteRT's double, TFLite Micro's float)."""
    exp, reciprocal = LUT_FUNCTIONS[precision]
    return (lut_populate_int16(exp, -EXP_RANGE, 0.0, -1.0, 1.0, precision),
            lut_populate_int16(reciprocal, 0.0, 1.0, -1.0, 1.0, precision))


def int16_scaling(input_scale: float, beta: float) -> tuple[int, int]:
    """(multiplier, shift) of a difference onto the exp table's steps: input_scale x beta (a float32 product) / (10 /
    65535), in double."""
    return quantize_multiplier(float(np.float32(input_scale) * np.float32(beta)) / (EXP_RANGE / 65535.0))


def softmax_int16(inputs: np.ndarray, input_scale: float, beta: float, precision: str = "double") -> np.ndarray:
    """int16 [..., D] -> int16 [..., D] along the last axis, at 1/32768: per row, each difference from the maximum
    rescaled onto [-65535, 0] -> [-10, 0], recentred by 32767 and saturated, its exp from the table (Q0.15); the sum's
    reciprocal from the 1 / (1 + x) table, the sum normalized by its leading zeros; each output the exp x the
    reciprocal, rounded, in [0, 32767]."""
    exp_lut, reciprocal_lut = int16_luts(precision)
    multiplier, shift = int16_scaling(input_scale, beta)
    rows = inputs.reshape(-1, inputs.shape[-1]).astype(np.int64)
    scaled = multiply_by_quantized_multiplier(rows - rows.max(axis=1, keepdims=True), multiplier, shift)
    exps = lut_lookup_int16(np.clip(scaled + 32767, -32768, 32767), exp_lut)
    total = exps.sum(axis=1)
    headroom_plus_one = 32 - np.array([int(value).bit_length() for value in total], np.int64)  # CountLeadingZeros (uint32)
    shifted = ((total << (headroom_plus_one - 1)) + (1 << 13)) >> 14
    reciprocal = lut_lookup_int16(np.clip(shifted - (1 << 15) - (1 << 16), -32768, 32767), reciprocal_lut)
    right_shift = (31 - headroom_plus_one)[:, None]
    outputs = (exps * reciprocal[:, None] + (np.int64(1) << (right_shift - 1))) >> right_shift
    return np.clip(outputs, 0, 32767).astype(np.int16).reshape(inputs.shape)
