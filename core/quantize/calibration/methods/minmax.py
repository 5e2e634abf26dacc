"""minmax: no saturation, T = absmax (what weights always use, seed 002)."""

from ..histogram import TensorStatistics
from ..weights import minmax_pow2, minmax_threshold
from .base import CalibrationSettings, ThresholdMethod, register_method, require_observed


@register_method
class MinMax(ThresholdMethod):
    name = "minmax"
    auto_rank = 1
    summary = "the largest |x| seen (clips nothing)"
    weight_choices = (minmax_pow2, minmax_threshold)

    def threshold(self, stats: TensorStatistics, settings: CalibrationSettings) -> float:
        require_observed(stats, self.name)
        return float(stats.absmax)
