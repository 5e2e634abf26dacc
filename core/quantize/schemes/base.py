"""What every quantization scheme is (`QuantScheme`: how a chosen range becomes integers and scales) and the registry
of schemes (`SCHEMES`, filled by `register_scheme`), with the helpers the schemes share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from core.frontend.fake_quant import QuantRange
from core.frontend.layers import OutputRule
from core.quantize.calibration.histogram import TensorStatistics
from core.quantize.calibration.methods import CalibrationSettings, get_method, weight_methods
from core.quantize.runtimes import Runtime, runtime_named
from core.quantize.table import CalibrationError, TensorEntry


def pow2_range(log2scale_value: int, bits: int) -> list[float]:
    step = 2.0 ** -log2scale_value
    return [-(2 ** (bits - 1)) * step, (2 ** (bits - 1) - 1) * step]


def clip_limit(entry: TensorEntry) -> float:
    """The |x| beyond which an entry's grid clips a value rather than rounds it: the range's larger magnitude;
    on an affine grid plus half a step (a value within half a step past the range's end rounds to it, as the
    converter's nudged zero point leaves the largest value of a minmax range). A power-of-two range's
    magnitude is its -min (see clipped_fraction)."""
    return max(-entry.range[0], entry.range[1]) + entry.grid.clip_margin


def clipped_fraction(stats: TensorStatistics | None, limit: float) -> float | None:
    """Share of the observed values whose magnitude is beyond `limit`. Callers pass the range's
    magnitude -min: |x| cannot tell -2^k (exact) from +2^k (one step past max), and the
    negative side is the one a symmetric int8 range reaches."""
    if stats is None or stats.count == 0 or stats.absmax <= limit:
        return None if stats is None else 0.0
    beyond = stats.bin_centers > limit
    return float(stats.counts[beyond].sum() / stats.counts.sum())


@dataclass(frozen=True)
class ActivationChoice:
    """What calibration hands a scheme for one activation: the method's threshold on |x|, the
    observed statistics (None under qat without data) and the QAT graph's own range (qat only)."""

    tensor: str
    layer: str | None
    method: str
    threshold: float
    stats: TensorStatistics | None
    qat_range: QuantRange | None = None
    # the method's own power-of-two exponent (mse on a power-of-two grid), when it has one
    pow2_exponent: int | None = None


Weigh = Callable[[np.ndarray], float]


@dataclass(frozen=True)
class QuantScheme(ABC):
    """One quantization scheme: how a chosen range becomes integers and scales."""

    name: ClassVar[str]
    bits: int = 8
    # scales are powers of two (a method may then pick its own exponent: ActivationChoice.pow2_exponent)
    power_of_two: ClassVar[bool] = False
    # the IR dialect emit_ir writes a table of this scheme in (core/ir/op.py: DIALECTS)
    ir_dialect: ClassVar[str]
    # an accelerator target may choose it (the accelerator's lowerings cover its dialect: core/backends/accel/ops)
    accelerated: ClassVar[bool] = False
    # its settings, `target.scheme`: a dataclass whose first field is `name` (the scheme's) and which has `bits`
    settings: ClassVar[type]

    @classmethod
    def from_settings(cls, settings, target: str, pow2_rounding: str) -> "QuantScheme":
        """The scheme its settings (`target.scheme`, typed or plain) configure on target `target`; calib.pow2_rounding
        says how a power-of-two scheme rounds a threshold to its grid."""
        return cls(bits=config_value(settings, "bits"))

    @property
    def qmin(self) -> int:
        return -(2 ** (self.bits - 1))

    @property
    def qmax(self) -> int:
        return 2 ** (self.bits - 1) - 1

    @abstractmethod
    def fixed_input_entry(self, stats: TensorStatistics | None) -> TensorEntry | None:
        """The network input's entry when the target fixes it; None: chosen like any activation."""

    @abstractmethod
    def activation_entry(self, choice: ActivationChoice) -> TensorEntry:
        """An activation's entry (kind "activation") for the method's choice."""

    @abstractmethod
    def weight_entry(self, layer: str, weight: np.ndarray, channels: Callable[[], list[np.ndarray]], weight_method: str,
                     weigh: Weigh) -> TensorEntry:
        """A weight's entry; `channels()`: its values per output channel (for per-channel schemes)."""

    @abstractmethod
    def qat_constant_entry(self, kind: str, key: str, layer: str, quant_range: QuantRange, channels: int) -> TensorEntry:
        """A weight's or bias's entry from its own FakeQuant range (`channels` output channels)."""

    @abstractmethod
    def bias_entry(self, layer: str, bias: np.ndarray, input_entry: TensorEntry, weight_entry: TensorEntry) -> TensorEntry:
        """A bias's entry, given the entries of the layer's input and weight."""

    def fit_weight_to_bias(self, layer: str, bias: np.ndarray, input_entry: TensorEntry, weight_entry: TensorEntry) -> TensorEntry:
        """The weight's entry the bias can be represented with (the scheme's integer bias at a scale the input's and the
        weight's decide): `weight_entry` itself unless the scheme widens it."""
        return weight_entry

    # calib.method=auto's candidates: the entries `methods` give a tensor, each labelled by its method
    # ("kl", or "kl/ceil" where the scheme rounds a threshold several ways); auto keeps one per range
    def activation_candidates(self, tensor: str, stats: TensorStatistics, methods: list[str],
                              settings: CalibrationSettings) -> list[TensorEntry]:
        candidates = []
        for name in methods:
            if get_method(name).does_not_apply(stats, settings):
                continue  # its fallback is among the methods, or the tensor has no candidate of it
            threshold = get_method(name).threshold(stats, settings)
            entry = self.activation_entry(ActivationChoice(tensor, None, name, threshold, stats))
            entry.clipped_fraction = clipped_fraction(stats, clip_limit(entry))
            candidates.append(entry)
        return candidates

    def weight_candidates(self, layer: str, weight: np.ndarray, channels: Callable[[], list[np.ndarray]]) -> list[TensorEntry]:
        return [self.weight_entry(layer, weight, channels, name, np.mean) for name in weight_methods()]

    # what the scheme's kernels require of a layer's output, by the rule its pattern declares (Layer.output_rule): a
    # quantization they fix (scale, zero point), or the quantization of what the layer reads
    fixed_outputs: ClassVar[dict[OutputRule, tuple[float, int]]] = {}
    input_quantized_outputs: ClassVar[frozenset[OutputRule]] = frozenset()
    # of those, the ones that keep their input's largest values (a max pool): the input is ranged for them too
    maximum_outputs: ClassVar[frozenset[OutputRule]] = frozenset()

    def fixed_output_entry(self, rule: OutputRule, stats: TensorStatistics | None) -> TensorEntry | None:
        """The entry the scheme fixes for the output of a layer of `rule`, or None."""
        if rule not in self.fixed_outputs:
            return None
        scale, zero_point = self.fixed_outputs[rule]
        quant_range = [(self.qmin - zero_point) * scale, (self.qmax - zero_point) * scale]
        entry = TensorEntry("activation", "fixed", max(-quant_range[0], quant_range[1]), quant_range, scale=scale, zero_point=zero_point,
                            absmax=absmax_of_stats(stats))
        entry.clipped_fraction = clipped_fraction(stats, clip_limit(entry))
        return entry



# every scheme, by name: the `target/scheme` config group's options (pipeline/config.py), the accelerator's choices
# (those `accelerated`), emission's dialect and the reference check all ask these classes
SCHEMES: dict[str, type[QuantScheme]] = {}


def register_scheme(scheme: type[QuantScheme]) -> type[QuantScheme]:
    """A scheme class's decorator: registers it under its name."""
    if scheme.name in SCHEMES:
        raise ValueError(f"quantization scheme {scheme.name!r} is registered twice ({SCHEMES[scheme.name].__module__}, {scheme.__module__})")
    if scheme.settings().name != scheme.name:
        raise ValueError(f"quantization scheme {scheme.name!r}: its settings' name default is {scheme.settings().name!r}")
    SCHEMES[scheme.name] = scheme
    return scheme


def weight_method_name(weight_method: str) -> str:
    return "absmax" if weight_method == "minmax" else weight_method


def absmax_of_stats(stats: TensorStatistics | None) -> float | None:
    return None if stats is None else float(stats.absmax)


def absmax_of(values: np.ndarray) -> float:
    return float(np.abs(values).max()) if np.size(values) else 0.0


def scheme_of(target, pow2_rounding: str = "ceil") -> QuantScheme:
    """The scheme a target config (conf/target/*.yaml composed, typed or plain) chooses with `target.scheme`, configured
    by its settings; calib.pow2_rounding says how a power-of-two scheme rounds a threshold to its grid."""
    settings = config_value(target, "scheme")
    return scheme_class(config_value(settings, "name")).from_settings(settings, config_value(target, "name"), pow2_rounding)


def scheme_class(name: str) -> type[QuantScheme]:
    if name not in SCHEMES:
        raise CalibrationError(f"target/scheme={name}: not a quantization scheme; choose one of {', '.join(SCHEMES)}")
    return SCHEMES[name]



def runtime_of(target) -> Runtime:
    """The runtime a target config (conf/target/*.yaml composed, typed or plain) chooses: `target.scheme.runtime`, else
    its scheme's default (a scheme whose settings have no `runtime` has one: its dialect's)."""
    settings = config_value(target, "scheme")
    scheme = scheme_class(config_value(settings, "name"))
    return runtime_named(config_value(settings, "runtime", None), scheme.ir_dialect, scheme.name)


_REQUIRED = object()


def config_value(node, key: str, default: Any = _REQUIRED) -> Any:
    """node.key of a config, typed (a dataclass) or plain (a mapping), an Enum as its value; `default` where it has none."""
    if default is _REQUIRED:
        value = node[key] if isinstance(node, Mapping) else getattr(node, key)
    else:
        value = node.get(key, default) if isinstance(node, Mapping) else getattr(node, key, default)
    return getattr(value, "value", value)
