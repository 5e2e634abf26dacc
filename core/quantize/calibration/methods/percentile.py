"""percentile: T = the `settings.percentile` of |x|, estimated from the histogram.

Inside a bin the values are taken as uniformly spread, the element of (0-based) rank j sitting
at cumulative count j + 0.5; the percentile q is read at rank (n - 1) q / 100, the rank
np.percentile's default ("linear") method interpolates at. Then T lies within one bin width
of the two order statistics np.percentile interpolates between (so within one bin width of
np.percentile wherever the data are dense).
"""

from __future__ import annotations

import numpy as np

from ..histogram import TensorStatistics
from .base import CalibrationSettings, Setting, ThresholdMethod, register_method, require_observed


def percentile_from_histogram(counts: np.ndarray, bin_width: float, percentile: float) -> float:
    """The `percentile` (0..100] of the values histogrammed in `counts` (bins of `bin_width` from 0)."""
    counts = np.asarray(counts, dtype=np.float64)
    cumulative = np.concatenate(([0.0], np.cumsum(counts)))
    total = cumulative[-1]
    if total == 0 or bin_width == 0:
        return 0.0
    # Rank (total - 1) q / 100 (np.percentile's), plus 0.5: where that element sits.
    target = min((total - 1.0) * percentile / 100.0 + 0.5, total)
    bin_index = int(np.searchsorted(cumulative[1:], target, side="left"))  # first bin reaching it
    bin_index = min(bin_index, counts.size - 1)
    fraction = (target - cumulative[bin_index]) / counts[bin_index] if counts[bin_index] > 0 else 0.0
    return float((bin_index + min(max(fraction, 0.0), 1.0)) * bin_width)


@register_method
class Percentile(ThresholdMethod):
    name = "percentile"
    auto_rank = 2
    summary = "clips |x| at a percentile of what it saw"
    PERCENTILE = Setting("percentile", 99.99, "that percentile", check="percent")
    settings = (PERCENTILE,)

    def threshold(self, stats: TensorStatistics, settings: CalibrationSettings) -> float:
        require_observed(stats, self.name)
        return percentile_from_histogram(stats.counts, stats.bin_width, settings.option(self.PERCENTILE))
