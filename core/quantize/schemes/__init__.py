"""The quantization schemes a target chooses (`target/scheme`): what an integer means, per tensor or per channel, and how
each kind of tensor (activation, weight, bias) gets its quantization from the range a calibration method chose.
Calibration asks the target's scheme for every table entry; annotate, emission and the backends read what the entries
say. Nothing else branches on the target.

One module each, registered by name in `SCHEMES` (`register_scheme`): a scheme is a class with the settings it owns
(`settings`: a dataclass, its option of the `target/scheme` Hydra config group, whose keys are `target.scheme.*`), the
IR dialect it emits (`ir_dialect`), whether an accelerator runs it (`accelerated`); the config's choices, the
accelerator's, emission and the reference check ask it. Every module of this package is imported here, so a new
scheme is one new file.
"""

import importlib
import pkgutil

from .base import (SCHEMES, ActivationChoice, QuantScheme, clip_limit, clipped_fraction, pow2_range, register_scheme, runtime_of,
                   scheme_class, scheme_of)

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module != "base":
        importlib.import_module(f"{__name__}.{_module}")

from .pow2_symmetric import Pow2Symmetric, Pow2SymmetricSettings  # noqa: E402  (the shipped schemes, by name)
from .tflite_int8 import TfliteInt8, TfliteInt8Settings, TfliteRuntime  # noqa: E402
from .tflite_int16x8 import TfliteInt16x8  # noqa: E402

__all__ = ["SCHEMES", "ActivationChoice", "Pow2Symmetric", "Pow2SymmetricSettings", "QuantScheme", "TfliteInt16x8", "TfliteInt8", "TfliteInt8Settings",
           "TfliteRuntime", "clip_limit", "clipped_fraction", "pow2_range", "register_scheme", "runtime_of", "scheme_class", "scheme_of"]
