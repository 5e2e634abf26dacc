"""Threshold methods, one per module, registered by name in `METHODS`.

Every module of this package is imported here, so a new method is one new file.
"""

import importlib
import pkgutil

from .base import (CHECKS, METHODS, CalibrationSettings, Setting, ThresholdMethod, auto_candidates, choose_weights, clipping_is_deliberate, get_method, method_for,
                   methods_from_data, options_of, register_method, takes_model_ranges, weight_methods)

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = ["CHECKS", "CalibrationSettings", "METHODS", "Setting", "ThresholdMethod", "auto_candidates", "choose_weights", "clipping_is_deliberate", "get_method", "method_for", "methods_from_data", "options_of", "register_method", "takes_model_ranges", "weight_methods"]
