"""The threshold-method interface, its settings and the registry.

A method turns one tensor's statistics into a clipping threshold T >= 0 for |x| (symmetric
quantization: values are clipped to [-T, T]). Adding a method is one file in this package:
a `ThresholdMethod` subclass with a `name`, a one-line `summary` and its own `settings`, decorated with
`@register_method`; the package imports every module in it, so the name becomes a choice of `calib.method`
(pipeline/params.py), its settings keys of `calib` (pipeline/config.py: `calib.<setting>`, with their
defaults and checks), and its summary a line of `run.py --help`.
"""

from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, Optional

import numpy as np

from ..histogram import TensorStatistics
from ..weights import Weigh, WeightChoice


# what a setting's `check` allows (pipeline/config.py checks the config's keys by the same names before any stage runs)
CHECKS = {"positive": (lambda value: value > 0, "a positive number"),
          "fraction": (lambda value: 0.0 < value <= 1.0, "a fraction in (0, 1]"),
          "percent": (lambda value: 0.0 < value <= 100.0, "a percentage in (0, 100]")}


@dataclass(frozen=True)
class Setting:
    """A method's own setting, `calib.<name>` in the config: its default, what it means and its check (CHECKS)."""

    name: str
    default: Any
    help: str
    check: Optional[str] = None

    def validate(self, value: Any) -> None:
        if self.check is not None and not CHECKS[self.check][0](value):
            raise ValueError(f"{self.name} must be {CHECKS[self.check][1]}, got {value}")


@dataclass(frozen=True)
class CalibrationSettings:
    """What the methods need besides the statistics.

    options: the methods' own settings by name (`Setting`s; those not given take their defaults).
    num_quant_levels: positive quantization levels, 2**(bits-1) = 128 for symmetric int8
        (the KL target distribution has this many bins; the mse step is T / num_quant_levels).
    fake_quant_range: the tensor's own (min, max), for a method whose range is the model's (`range_from_model`):
        `ThresholdMethod.settings_for` puts it here per tensor.
    """

    options: Mapping[str, Any] = field(default_factory=dict)
    num_quant_levels: int = 128
    weight_method: str = "minmax"  # how weights get their threshold: core/quantize/calibration/weights.py
    fake_quant_range: Optional[tuple[float, float]] = None

    def __post_init__(self):
        declared = {setting.name: setting for method in METHODS.values() for setting in method.settings}
        for name, value in self.options.items():
            if name not in declared:
                raise ValueError(f"no calibration method has a setting {name!r}; the settings: {', '.join(sorted(declared))}")
            declared[name].validate(value)
        if self.num_quant_levels < 1:
            raise ValueError(f"num_quant_levels must be >= 1, got {self.num_quant_levels}")

    def option(self, setting: Setting) -> Any:
        return self.options.get(setting.name, setting.default)


def options_of(source: Any) -> dict[str, Any]:
    """Every method's settings as `source` (the config's `calib`) holds them, by name."""
    return {setting.name: getattr(source, setting.name) for method in METHODS.values() for setting in method.settings}


class ThresholdMethod(abc.ABC):
    """One way of choosing the clipping threshold of a tensor. Stateless."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""  # one line: what it chooses (run.py --help)
    settings: ClassVar[tuple[Setting, ...]] = ()  # its own settings, calib.<name> in the config
    # the tensors the method's argument holds for: "all", or "weight_inputs", the tensors a conv, depthwise conv
    # or dense layer reads (where seed 003 computes KL thresholds); any other tensor, a network's end points
    # included, takes the threshold of the method named by `fallback`
    scope: ClassVar[str] = "all"
    fallback: ClassVar[Optional[str]] = None
    # whether the threshold weighs what clipping costs against what rounding costs (mse): a large clipped share is
    # then the cheaper error, not a sign of harm, and the quality guard on clipping leaves it be
    weighs_clipping: ClassVar[bool] = False
    # whether the range is the model's own (a quantization-aware graph's FakeQuant, a pre-quantized .tflite's
    # scale and zero point): what falls outside it is clipped by the model as trained, not by calibration
    # Such a method keeps the trained graph (no equalization, no bias correction) and needs the model's ranges:
    # `model_ranges` names the nodes that hold them ("FakeQuant"), for the refusal when a model has none.
    range_from_model: ClassVar[bool] = False
    model_ranges: ClassVar[str] = ""
    # a weight method too (calib.weight_method): its (power-of-two, float-threshold) choice of a weight's range
    # (core/quantize/calibration/weights.py); None: not one
    weight_choices: ClassVar[Optional[tuple[Callable[..., WeightChoice], Callable[..., WeightChoice]]]] = None
    # one of calib.method=auto's candidates by default (calib.auto.methods), tried in this rank's order (the search
    # starts from the first of the best-scoring whole tables, and tries each tensor's candidates in order); None: not one
    auto_rank: ClassVar[Optional[int]] = None

    def settings_for(self, tensor: str, settings: CalibrationSettings, ranges: Mapping[str, Any]) -> Optional[CalibrationSettings]:
        """The settings it chooses `tensor`'s threshold with, or None when it has nothing to go on for that
        tensor (a model-range method and a tensor the model left without a range: the caller falls back)."""
        if not self.range_from_model:
            return settings
        if tensor not in ranges:
            return None
        return dataclasses.replace(settings, fake_quant_range=(ranges[tensor].min, ranges[tensor].max))

    def does_not_apply(self, stats: TensorStatistics | None, settings: CalibrationSettings) -> Optional[str]:
        """Why the method's argument does not hold for a tensor with these statistics (its fallback then chooses), or
        None: it applies."""
        return None

    @abc.abstractmethod
    def threshold(self, stats: TensorStatistics, settings: CalibrationSettings) -> float:
        """The clipping threshold T >= 0 for |x|; 0 for an all-zero tensor."""

    def pow2_exponent(self, stats: TensorStatistics, settings: CalibrationSettings) -> Optional[int]:
        """On a power-of-two target, the k of the range [-2^k, 2^k) this method chooses itself, or
        None (the default): the target rounds `threshold` to a power of two (target.pow2_rounding).
        A method whose objective can be evaluated on the target's own ranges overrides it."""
        return None


METHODS: dict[str, type[ThresholdMethod]] = {}


def register_method(cls: type[ThresholdMethod]) -> type[ThresholdMethod]:
    """Class decorator: make `cls` available under `cls.name`."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__qualname__} needs a class attribute `name` (a non-empty str)")
    if name in METHODS and METHODS[name] is not cls:
        raise ValueError(f"two threshold methods named {name!r}: "
                         f"{METHODS[name].__qualname__} and {cls.__qualname__}")
    METHODS[name] = cls
    return cls


def get_method(name: str) -> ThresholdMethod:
    """An instance of the method registered under `name`."""
    try:
        return METHODS[name]()
    except KeyError:
        raise ValueError(f"unknown calibration method {name!r}; choices: "
                         f"{', '.join(sorted(METHODS))}") from None


def method_for(name: str, weight_input: bool, stats: TensorStatistics | None = None,
               settings: CalibrationSettings | None = None) -> tuple[str, Optional[str]]:
    """(the method that chooses a tensor's threshold under calib.method=`name`, why it is not `name` or None): `name`
    itself where its argument holds (its scope: `weight_input`, a weight layer reads the tensor and the network computes
    it; and the tensor's statistics, `does_not_apply`), else its fallback."""
    method = METHODS[name]
    if method.scope != "all" and not weight_input:
        return method.fallback, f"{name} ranges what conv, depthwise conv and dense layers read (seed 003); {method.fallback} here"
    why = method().does_not_apply(stats, settings or CalibrationSettings()) if stats is not None else None
    return (name, None) if why is None else (method.fallback, f"{why}; {method.fallback} here")


def weight_methods() -> list[str]:
    """The methods calib.weight_method may name."""
    return [name for name, method in METHODS.items() if method.weight_choices is not None]


def choose_weights(method: str, weights: np.ndarray, bits: int, pow2: bool, weigh: Weigh = np.mean) -> WeightChoice:
    """A weight's range by weight method `method`. `weigh` reduces the per-weight squared errors to the one mse
    minimizes: their mean by default, or what they add to the layer's output (calibration/build.py weighs each by the
    second moment of the input channel it multiplies)."""
    if method not in weight_methods():
        raise ValueError(f"calib.weight_method={method!r}: choose one of {', '.join(weight_methods())}")
    return METHODS[method].weight_choices[0 if pow2 else 1](np.asarray(weights, dtype=np.float64), bits, weigh)


def auto_candidates() -> list[str]:
    """The methods calib.method=auto searches over by default: those of the registry that set `auto_rank`, in its order."""
    ranked = [method for method in METHODS.values() if method.auto_rank is not None and not method.range_from_model]
    return [method.name for method in sorted(ranked, key=lambda method: method.auto_rank)]


def methods_from_data() -> list[str]:
    """The methods that compute a range from the calibration data (all but the model-range ones), by name."""
    return sorted(name for name, method in METHODS.items() if not method.range_from_model)


def takes_model_ranges(name: str) -> bool:
    """Whether calib.method=`name` takes the model's own ranges (qat): it keeps the trained graph and needs the ranges
    (auto, a search over the methods, does not)."""
    return name in METHODS and METHODS[name].range_from_model


def clipping_is_deliberate(name: str) -> bool:
    """Whether the clipping of the method named `name` (or auto's `method/rounding` candidate) is no sign of harm:
    it chose the clipping by its cost, or the range is the model's own."""
    method = METHODS.get(name.split("/")[0])
    return bool(method and (method.weighs_clipping or method.range_from_model))


def require_observed(stats: TensorStatistics, method: str) -> None:
    """Methods that read the histogram cannot work on a tensor that saw no data."""
    if stats.count == 0:
        raise ValueError(f"method {method!r}: the tensor has no observed values (update() was never "
                         "called with a non-empty batch)")
