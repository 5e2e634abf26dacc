"""minmax: no saturation, T = absmax (what weights always use, seed 002)."""

from ..histogram import TensorStatistics
from .base import CalibrationSettings, ThresholdMethod, register_method, require_observed


@register_method
class MinMax(ThresholdMethod):
    name = "minmax"
    summary = "the largest |x| seen (clips nothing)"

    def threshold(self, stats: TensorStatistics, settings: CalibrationSettings) -> float:
        require_observed(stats, self.name)
        return float(stats.absmax)
