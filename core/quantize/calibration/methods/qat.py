"""qat: the threshold a quantization-aware-trained graph already fixed in a FakeQuant node.

Nothing is computed from the histogram; the caller looks up the tensor's FakeQuant (min, max)
and passes it as `settings.fake_quant_range`. The threshold is the largest magnitude of that
range, max(-min, max): for the power-of-two range [-8, 7.9375] it is 8 (-8 is representable),
and `scales.qat_log2scale` gives its exact log2scale.
"""

from ..histogram import TensorStatistics
from .base import CalibrationSettings, ThresholdMethod, register_method


class MissingFakeQuantRange(ValueError):
    """The qat method was asked for a tensor without a FakeQuant range."""


@register_method
class QatRanges(ThresholdMethod):
    name = "qat"
    summary = "the ranges trained into a quantization-aware graph's FakeQuant nodes"
    range_from_model = True
    model_ranges = "FakeQuant"

    def threshold(self, stats: TensorStatistics, settings: CalibrationSettings) -> float:
        if settings.fake_quant_range is None:
            raise MissingFakeQuantRange(
                "method 'qat' takes the threshold from the tensor's FakeQuant [min, max], and none was "
                "supplied (settings.fake_quant_range is None): the tensor has no FakeQuant node, or its "
                "range was not looked up; calibrate it with minmax, kl, percentile or mse instead")
        fq_min, fq_max = (float(v) for v in settings.fake_quant_range)
        if not fq_min <= 0.0 <= fq_max:
            raise ValueError(f"FakeQuant range [{fq_min}, {fq_max}] does not contain 0")
        return max(-fq_min, fq_max)
