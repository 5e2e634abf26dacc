"""Weight thresholds, a choice like the activation methods (`calib.weight_method`).

- minmax: the threshold is max |w|: nothing saturates (today's behaviour, and TFLite's).
- mse: the threshold, or on a power-of-two target the log2scale, that minimizes the weights'
  squared quantization error; saturating a few outlier weights is allowed when that lowers it
  (a depthwise filter whose one channel reaches 355 while the others are tiny keeps their
  resolution). The candidates are few and explicit: log2scales from the unsaturated one to
  MSE_EXTRA_BITS finer; thresholds max|w| * MSE_FRACTIONS.

Each method returns a `WeightChoice`: the threshold (or log2scale) and the fraction of weights it
saturates, which the calibration table reports per layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from core.quantize.grid import Pow2Grid

Weigh = Callable[[np.ndarray], float]  # per-weight squared errors -> the error a choice minimizes

MSE_EXTRA_BITS = 4
MSE_FRACTIONS = tuple(1.0 - 0.05 * step for step in range(11))  # 1.0 .. 0.5


@dataclass(frozen=True)
class WeightChoice:
    threshold: float  # |w| beyond it saturates
    log2scale: int | None  # power-of-two targets
    saturated_fraction: float


def _levels(bits: int) -> int:
    return 2 ** (bits - 1) - 1


def unsaturated_log2scale(absmax: float, bits: int) -> int:
    """The finest power-of-two scale whose int range still holds absmax: no clipping."""
    if absmax == 0.0:
        return 0
    return math.floor(math.log2(_levels(bits) / absmax))


def pow2_quantized(values: np.ndarray, log2scale: int, bits: int) -> np.ndarray:
    """`values` quantized at 2^-log2scale as FakeQuant does (round half up, saturate), in float64."""
    return Pow2Grid(log2scale).fake_quantized(values, bits)


def pow2_error(weights: np.ndarray, log2scale: int, bits: int, weigh: Weigh = np.mean) -> float:
    """The squared error of the weights quantized at 2^-log2scale, reduced by `weigh` (the mean)."""
    return float(weigh((weights - pow2_quantized(weights, log2scale, bits)) ** 2))


def threshold_error(weights: np.ndarray, threshold: float, bits: int, weigh: Weigh = np.mean) -> float:
    """The squared error of symmetric quantization with scale threshold / (2^(bits-1) - 1), reduced by `weigh`."""
    if threshold == 0.0:
        return float(weigh(weights**2))
    scale = threshold / _levels(bits)
    quantized = np.clip(np.round(weights / scale), -_levels(bits), _levels(bits)) * scale
    return float(weigh((weights - quantized) ** 2))


def _saturated(weights: np.ndarray, threshold: float) -> float:
    return float(np.mean(np.abs(weights) > threshold)) if weights.size else 0.0


def minmax_pow2(weights: np.ndarray, bits: int, weigh: Weigh = np.mean) -> WeightChoice:
    absmax = float(np.abs(weights).max()) if weights.size else 0.0
    return WeightChoice(absmax, unsaturated_log2scale(absmax, bits), 0.0)


def mse_pow2(weights: np.ndarray, bits: int, weigh: Weigh = np.mean) -> WeightChoice:
    absmax = float(np.abs(weights).max()) if weights.size else 0.0
    first = unsaturated_log2scale(absmax, bits)
    candidates = range(first, first + MSE_EXTRA_BITS + 1)
    best = min(candidates, key=lambda k: (pow2_error(weights, k, bits, weigh), k))  # ties: the coarser, fewer saturate
    threshold = _levels(bits) * 2.0**-best
    return WeightChoice(min(threshold, absmax), best, _saturated(weights, threshold))


def minmax_threshold(weights: np.ndarray, bits: int, weigh: Weigh = np.mean) -> WeightChoice:
    absmax = float(np.abs(weights).max()) if weights.size else 0.0
    return WeightChoice(absmax, None, 0.0)


def mse_threshold(weights: np.ndarray, bits: int, weigh: Weigh = np.mean) -> WeightChoice:
    absmax = float(np.abs(weights).max()) if weights.size else 0.0
    best = min((absmax * fraction for fraction in MSE_FRACTIONS), key=lambda t: (threshold_error(weights, t, bits, weigh), -t))
    return WeightChoice(best, None, _saturated(weights, best))

