"""Calibration math, pure numpy: streaming tensor statistics (`histogram`), threshold methods
(`methods`, a registry by name) and the conversion of thresholds into target scales (`scales`)."""

from .histogram import CalibrationDataError, TensorStatistics
from .methods import METHODS, CalibrationSettings, ThresholdMethod, get_method, register_method

__all__ = ["CalibrationDataError", "TensorStatistics", "METHODS", "CalibrationSettings",
           "ThresholdMethod", "get_method", "register_method"]
