"""Thresholds into target scales.

Power-of-two (TF2IR, seed 000): a tensor stored in `bits`-bit integers with range [-2^k, 2^k)
has log2scale = (bits - 1) - k, real = int * 2^-log2scale; threshold 4 -> [-4, 4) -> 5.
Float (TFLite/TensorRT symmetric): scale = T / (2^(bits-1) - 1), real = int * scale.
Weights are never saturated (seed 002): their threshold is their absmax.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from .histogram import CalibrationDataError, TensorStatistics, find_non_finite
from .methods.mse import expected_squared_error

ROUNDINGS = ("ceil", "nearest", "mse")


class Log2Scale(NamedTuple):
    """A chosen log2scale, and a warning the caller should report (None if all is well)."""

    log2scale: int
    warning: Optional[str] = None


def zero_tensor_log2scale(bits: int = 8) -> int:
    """The log2scale of an all-zero tensor: any value represents it exactly; bits - 1, the range
    [-1, 1), is the one the network input uses (target.scheme.input_log2scale), so shifts computed from
    it stay ordinary."""
    return bits - 1


def _check_threshold(threshold: float) -> float:
    threshold = float(threshold)
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"threshold must be finite and >= 0, got {threshold}")
    return threshold


def ceil_log2(threshold: float) -> int:
    """The smallest k with 2^k >= threshold > 0, exactly (no log2 rounding)."""
    mantissa, exponent = math.frexp(threshold)  # threshold = mantissa * 2^exponent, mantissa in [0.5, 1)
    return exponent - 1 if mantissa == 0.5 else exponent


def _squared_errors_of_ranges(stats: TensorStatistics, exponents: list[int], bits: int) -> np.ndarray:
    """Expected squared error of the int8 ranges [-2^k, 2^k) over the histogram of `stats`."""
    if stats.absmax == 0:
        return np.zeros(len(exponents))  # every value is 0: no range has any error
    thresholds = np.ldexp(1.0, np.array(exponents))
    return expected_squared_error(stats.counts, stats.bin_width, thresholds, 2 ** (bits - 1))


def log2scale(threshold: float, bits: int = 8, rounding: str = "ceil",
              stats: Optional[TensorStatistics] = None) -> Log2Scale:
    """The log2scale of a power-of-two range for clipping threshold T.

    ceil: the smallest range 2^k >= T (no clipping beyond T); nearest: k = round(log2 T), halves
    up; mse: of the ceil and floor candidates, the one with the smaller expected squared error
    over `stats`' histogram (ties to ceil). T = 0 (all-zero tensor): zero_tensor_log2scale(bits)
    with a warning."""
    threshold = _check_threshold(threshold)
    if rounding not in ROUNDINGS:
        raise ValueError(f"unknown pow2 rounding {rounding!r}; choices: {', '.join(ROUNDINGS)}")
    if threshold == 0:
        return Log2Scale(zero_tensor_log2scale(bits),
                         f"threshold is 0 (all-zero tensor); log2scale set to {zero_tensor_log2scale(bits)}")
    upper = ceil_log2(threshold)
    if rounding == "ceil":
        exponent = upper
    elif rounding == "nearest":
        exponent = math.floor(math.log2(threshold) + 0.5)
    else:
        if stats is None:
            raise ValueError("pow2 rounding 'mse' needs the tensor's statistics (stats=...)")
        lower = upper if math.ldexp(1.0, upper) == threshold else upper - 1
        errors = _squared_errors_of_ranges(stats, [upper, lower], bits)
        exponent = lower if errors[1] < errors[0] else upper
    return Log2Scale((bits - 1) - exponent)


def qat_log2scale(fq_min: float, fq_max: float, bits: int = 8) -> int:
    """The log2scale of a FakeQuant power-of-two range [-2^k, 2^k - 2^k / 2^(bits-1)]
    (min -8, max 7.9375 -> 4); raises ValueError if [fq_min, fq_max] is not such a range."""
    fq_min, fq_max = float(fq_min), float(fq_max)
    if not (math.isfinite(fq_min) and math.isfinite(fq_max) and fq_min < 0):
        raise ValueError(f"FakeQuant range [{fq_min}, {fq_max}] is not a symmetric power-of-two "
                         f"{bits}-bit range")
    exponent = round(math.log2(-fq_min))
    bound = math.ldexp(1.0, exponent)
    expected_max = bound - bound / 2 ** (bits - 1)
    # float32-stored ranges: allow a relative error of float32's epsilon.
    tolerance = 2.0 ** -23 * bound
    if abs(-fq_min - bound) > tolerance or abs(fq_max - expected_max) > tolerance:
        raise ValueError(
            f"FakeQuant range [{fq_min}, {fq_max}] is not a symmetric power-of-two {bits}-bit range; "
            f"the nearest is [{-bound}, {expected_max}] (log2scale {(bits - 1) - exponent})")
    return (bits - 1) - exponent


def float_scale(threshold: float, bits: int = 8) -> float:
    """Symmetric scale T / (2^(bits-1) - 1) (TFLite, TensorRT). T = 0 gives 1.0: zeros are exact
    under any scale, and 1.0 keeps x / scale finite."""
    threshold = _check_threshold(threshold)
    return threshold / (2 ** (bits - 1) - 1) if threshold > 0 else 1.0


def _finite_weights(weights: np.ndarray) -> np.ndarray:
    weights = np.asarray(weights)
    if weights.size == 0:
        raise ValueError("empty weight tensor")
    error = find_non_finite(weights)
    if error is not None:
        raise CalibrationDataError(f"weights: {error}", error.num_bad, error.first_index)
    return weights


def per_channel_absmax(weights: np.ndarray, axis: int) -> np.ndarray:
    """absmax of each channel along `axis` (e.g. -1 for HWIO conv kernels' output channels)."""
    weights = _finite_weights(weights)
    axis = axis % weights.ndim
    others = tuple(a for a in range(weights.ndim) if a != axis)
    return np.max(np.abs(weights), axis=others).astype(np.float64)

