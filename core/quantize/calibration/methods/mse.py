"""mse: the threshold minimizing the expected squared quantization error over the histogram.

Error model for a threshold T and step = T / num_quant_levels (int8 power-of-two range
[-T, T) has 2 * 128 steps of T / 128; TFLite/TensorRT's T / 127 differs by < 1 %):
- values are uniform inside each bin (as in re-binning and the percentile method);
- a value beyond T is clipped to T: a bin [a, a + w] wholly beyond T costs
  count * ((center - T)^2 + w^2 / 12), the mean of (x - T)^2 over the bin; the bin holding T
  splits: its part beyond T costs count / w * (a + w - T)^3 / 3, its part inside is rounded;
- a value inside is rounded to the nearest step: step^2 / 12 per value, the mean squared
  error of rounding when values are spread over many steps. This overcharges exact zeros
  (a ReLU's), which round without error, so on very sparse tensors it leans to a slightly
  smaller T.
Candidates are the bin edges w, 2w, ..., absmax (absmax: no clipping, minmax's choice), so mse
never predicts more error than minmax. `expected_squared_error` takes any thresholds;
scales.log2scale(rounding="mse") uses it to choose between two powers of two.

On a power-of-two target the candidates are the target's own ranges [-2^k, 2^k), from the one
holding absmax down POW2_CANDIDATES octaves: the least error among the ranges the target has,
not the continuous optimum rounded afterwards (which, on a ReLU6 output whose optimum lies
between 4 and 6, ceil would round to 8 exactly as it rounds percentile's or minmax's).
"""

from __future__ import annotations

import math

import numpy as np

from ..histogram import TensorStatistics
from ..weights import mse_pow2, mse_threshold as mse_weight_threshold
from .base import CalibrationSettings, ThresholdMethod, register_method, require_observed


def expected_squared_error(counts: np.ndarray, bin_width: float, thresholds: np.ndarray,
                           num_quant_levels: int) -> np.ndarray:
    """Total squared error (summed over all values) of quantizing the histogrammed |x| with
    each threshold in `thresholds`, under the model above. Vectorized over thresholds."""
    counts = np.asarray(counts, dtype=np.float64)
    thresholds = np.asarray(thresholds, dtype=np.float64)
    num_bins = counts.size
    centers = (np.arange(num_bins) + 0.5) * bin_width
    # Sums over bins k.. (suffix sums), index num_bins = nothing.
    def suffix(values):
        return np.concatenate((np.cumsum(values[::-1])[::-1], [0.0]))
    count_from, first_moment_from, second_moment_from = (
        suffix(counts), suffix(counts * centers), suffix(counts * centers ** 2))
    holding = np.clip(np.floor(thresholds / bin_width), 0, num_bins).astype(np.intp)  # bin holding T
    beyond = np.minimum(holding + 1, num_bins)                 # first bin wholly beyond T
    n_beyond = count_from[beyond]
    clipped = (second_moment_from[beyond] - 2 * thresholds * first_moment_from[beyond]
               + (thresholds ** 2 + bin_width ** 2 / 12) * n_beyond)
    in_range = holding < num_bins
    holding_count = np.where(in_range, counts[np.minimum(holding, num_bins - 1)], 0.0)
    part_beyond = np.where(in_range, (holding + 1) * bin_width - thresholds, 0.0)
    clipped += holding_count * part_beyond ** 3 / (3 * bin_width)
    n_inside = count_from[0] - n_beyond - holding_count * part_beyond / bin_width
    rounded = n_inside * (thresholds / num_quant_levels) ** 2 / 12
    return np.maximum(clipped, 0.0) + rounded


POW2_CANDIDATES = 8  # octaves below absmax's power of two; a range 2^-8 of absmax leaves nothing unclipped


def mse_threshold(counts: np.ndarray, bin_width: float, num_quant_levels: int) -> float:
    candidates = np.arange(1, np.asarray(counts).size + 1) * bin_width
    errors = expected_squared_error(counts, bin_width, candidates, num_quant_levels)
    return float(candidates[int(np.argmin(errors))])


@register_method
class MinSquaredError(ThresholdMethod):
    name = "mse"
    auto_rank = 3
    summary = "the range of least expected squared error (the default)"
    weight_choices = (mse_pow2, mse_weight_threshold)
    weighs_clipping = True

    def threshold(self, stats: TensorStatistics, settings: CalibrationSettings) -> float:
        require_observed(stats, self.name)
        if stats.absmax == 0:
            return 0.0
        return mse_threshold(stats.counts, stats.bin_width, settings.num_quant_levels)

    def pow2_exponent(self, stats: TensorStatistics, settings: CalibrationSettings) -> int | None:
        require_observed(stats, self.name)
        if stats.absmax == 0:
            return None  # every range is exact; the target's all-zero rule applies
        mantissa, upper = math.frexp(stats.absmax)  # absmax = mantissa * 2^upper, mantissa in [0.5, 1)
        upper = upper - 1 if mantissa == 0.5 else upper
        exponents = np.arange(upper, upper - POW2_CANDIDATES - 1, -1)
        errors = expected_squared_error(stats.counts, stats.bin_width, np.ldexp(1.0, exponents), settings.num_quant_levels)
        return int(exponents[int(np.argmin(errors))])  # ties: the first, the widest range
