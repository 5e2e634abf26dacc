"""The quantization schemes a target chooses: what an integer means, per tensor or per channel,
and how each kind of tensor (activation, weight, bias) gets its quantization from the range a
calibration method chose. Calibration asks the target's scheme for every table entry; annotate,
emission and the backends read what the entries say. Nothing else branches on the target.

- `Pow2Symmetric` (TF2IR, seed 000): int8 symmetric, one power-of-two scale per tensor
  (real = int * 2^-log2scale), biases int8 with a log2scale of their own.
- `TfliteInt8` (TensorFlow Lite's int8 specification, seed 004 [0038]-[0041]): activations int8
  affine (real = (int - zero_point) * scale, zero exactly representable), weights int8 symmetric
  per output channel in [-127, 127], biases int32 at input scale x weight scale.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np

from core.frontend.fake_quant import QuantRange
from core.quantize.calibration.histogram import TensorStatistics
from core.quantize.calibration.methods import CalibrationSettings, choose_weights, get_method, weight_methods
from core.quantize.calibration.scales import ROUNDINGS, float_scale, log2scale, qat_log2scale
from core.quantize.calibration.weights import unsaturated_log2scale
from core.quantize.table import CalibrationError, TensorEntry
from core.quantize.tflite_math import round_half_away


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

    @classmethod
    def from_target(cls, target, pow2_rounding: str) -> "QuantScheme":
        """The scheme a target config (conf/target/*.yaml, typed or plain) configures; calib.pow2_rounding says how a
        power-of-two scheme rounds a threshold to its grid."""
        return cls(bits=target.bits)

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

    # what the scheme's kernels require of a layer's output, by the TensorFlow op the layer ends in: a
    # quantization they fix (scale, zero point), or the quantization of what the layer reads
    fixed_outputs: ClassVar[dict[str, tuple[float, int]]] = {}
    input_quantized_outputs: ClassVar[frozenset[str]] = frozenset()

    def fixed_output_entry(self, tf_op: str, stats: TensorStatistics | None) -> TensorEntry | None:
        """The entry the scheme fixes for the output of a layer ending in `tf_op`, or None."""
        if tf_op not in self.fixed_outputs:
            return None
        scale, zero_point = self.fixed_outputs[tf_op]
        quant_range = [(self.qmin - zero_point) * scale, (self.qmax - zero_point) * scale]
        entry = TensorEntry("activation", "fixed", max(-quant_range[0], quant_range[1]), quant_range, scale=scale, zero_point=zero_point,
                            absmax=_absmax(stats))
        entry.clipped_fraction = clipped_fraction(stats, clip_limit(entry))
        return entry


@dataclass(frozen=True)
class Pow2Symmetric(QuantScheme):
    """TF2IR's: int8 symmetric, a power-of-two scale per tensor within the shifters' range."""

    name: ClassVar[str] = "pow2_symmetric"
    ir_dialect: ClassVar[str] = "tf2ir"
    power_of_two: ClassVar[bool] = True
    accelerated: ClassVar[bool] = True
    min_log2scale: int = -8
    max_log2scale: int = 16
    input_log2scale: int | None = None  # an override: None lets the method choose it from the data
    pow2_rounding: str = "ceil"
    target: str = "tf2ir"  # named in messages
    max_shift: int = 31  # the largest left shift the shifters align a bias into the accumulator with (target.max_shift)

    @classmethod
    def from_target(cls, target, pow2_rounding):
        return cls(bits=target.bits, min_log2scale=target.min_log2scale, max_log2scale=target.max_log2scale,
                   input_log2scale=target.input_log2scale, pow2_rounding=pow2_rounding, target=target.name, max_shift=target.max_shift)

    def activation_candidates(self, tensor, stats, methods, settings):
        """Each method's threshold under each rounding (ROUNDINGS); a method that picks its own power of
        two (mse) gives that one. Scales the target cannot shift to are left out."""
        candidates = []
        for name in methods:
            method = get_method(name)
            if method.does_not_apply(stats, settings):
                continue  # its fallback is among the methods, or the tensor has no candidate of it
            exponent = method.pow2_exponent(stats, settings)
            if exponent is not None:
                chosen = [(name, (self.bits - 1) - exponent, min(float(np.ldexp(1.0, exponent)), float(stats.absmax)))]
            else:
                threshold = method.threshold(stats, settings)
                chosen = [(f"{name}/{rounding}", log2scale(threshold, self.bits, rounding, stats).log2scale, threshold)
                          for rounding in ROUNDINGS] if threshold > 0 else []
            for label, value, threshold in chosen:
                if self.min_log2scale <= value <= self.max_log2scale:
                    quant_range = pow2_range(value, self.bits)
                    candidates.append(TensorEntry("activation", label, threshold, quant_range, log2scale=value,
                                                  clipped_fraction=clipped_fraction(stats, -quant_range[0])))
        return candidates

    def weight_candidates(self, layer, weight, channels):
        candidates = []
        for name in weight_methods():
            chosen = choose_weights(name, weight, self.bits, pow2=True)
            if self.min_log2scale <= chosen.log2scale <= self.max_log2scale:
                candidates.append(TensorEntry("weight", _weight_method_name(name), chosen.threshold, pow2_range(chosen.log2scale, self.bits),
                                              log2scale=chosen.log2scale, absmax=_absmax_of(weight), layer=layer,
                                              clipped_fraction=chosen.saturated_fraction))
        return candidates

    def fixed_input_entry(self, stats):
        if self.input_log2scale is None:
            return None
        quant_range = pow2_range(self.input_log2scale, self.bits)
        return TensorEntry("input", "fixed", -quant_range[0], quant_range, log2scale=self.input_log2scale,
                           absmax=_absmax(stats), clipped_fraction=clipped_fraction(stats, -quant_range[0]))

    def activation_entry(self, choice):
        warnings: list[str] = []
        threshold, stats = choice.threshold, choice.stats
        if choice.qat_range is not None:  # the graph's own range: exactly, when it is a power-of-two one
            value = self.qat_log2scale(choice.tensor, choice.qat_range)
        elif choice.pow2_exponent is not None:
            # what the range clips at: 2^k, or nothing beyond absmax when the range holds it
            value = (self.bits - 1) - choice.pow2_exponent
            threshold = min(float(np.ldexp(1.0, choice.pow2_exponent)), float(stats.absmax))
        else:
            chosen = log2scale(threshold, self.bits, self.pow2_rounding, stats)
            value = chosen.log2scale
            warnings += [chosen.warning] if chosen.warning else []
        value = self.fit_log2scale(value, f"tensor {choice.tensor} (layer {choice.layer})", warnings)
        entry = TensorEntry("activation", choice.method, threshold, pow2_range(value, self.bits), log2scale=value)
        entry.warnings = warnings
        return entry

    def weight_entry(self, layer, weight, channels, weight_method, weigh):
        warnings: list[str] = []
        chosen = choose_weights(weight_method, weight, self.bits, pow2=True, weigh=weigh)
        value = self.fit_log2scale(chosen.log2scale, f"weight of layer {layer}", warnings)
        return TensorEntry("weight", _weight_method_name(weight_method), chosen.threshold, pow2_range(value, self.bits), log2scale=value,
                           absmax=_absmax_of(weight), layer=layer, clipped_fraction=chosen.saturated_fraction, warnings=warnings)

    def qat_constant_entry(self, kind, key, layer, quant_range, channels):
        warnings: list[str] = []
        threshold = max(-quant_range.min, quant_range.max)
        value = self.fit_log2scale(self.qat_log2scale(key, quant_range), f"{kind} {key} (layer {layer})", warnings)
        return TensorEntry(kind, "qat", threshold, pow2_range(value, self.bits), log2scale=value, layer=layer, warnings=warnings)

    def bias_entry(self, layer, bias, input_entry, weight_entry):
        """The TF2IR bias is int8 with a log2scale of its own (bias_shift aligns it). bias_shift =
        input + weight - bias log2scale shifts the bias left into the accumulator: a bias finer
        than the accumulator has nothing to land on, so it is rounded at the accumulator's scale."""
        absmax = _absmax_of(bias)
        warnings: list[str] = []
        channel = f"channel {int(np.argmax(np.abs(np.asarray(bias).reshape(-1))))}" if np.size(bias) else "its bias"
        value = self.fit_log2scale(unsaturated_log2scale(absmax, self.bits), f"bias of layer {layer} ({channel}: |bias| {absmax:.3g})",
                                   warnings)
        accumulator = input_entry.log2scale + weight_entry.log2scale
        value = min(value, accumulator)
        if accumulator - value > self.max_shift:
            raise CalibrationError(
                f"bias of layer {layer}: {channel} (|bias| {absmax:.3g}) needs log2scale {value}, {accumulator - value} bits coarser than the "
                f"layer's accumulator (input x weight, 2^-{accumulator}), and the target's shifters align at most {self.max_shift} "
                f"(target.max_shift); widen target.max_shift, or calibrate the layer's input coarser (another calib.method or "
                "calib.pow2_rounding)")
        return TensorEntry("bias", "absmax", absmax, pow2_range(value, self.bits), log2scale=value, absmax=absmax, layer=layer,
                           warnings=warnings)

    def qat_log2scale(self, tensor: str, quant_range: QuantRange) -> int:
        """The FakeQuant's log2scale when its range is a full-range power-of-two one; otherwise
        (an asymmetric, narrow or non-power-of-two range, as tfmot trains them) the power-of-two
        range of its largest magnitude, rounded by calib.pow2_rounding (the calibrate stage
        reports every range that changed)."""
        if quant_range.num_bits != self.bits:
            raise CalibrationError(f"{tensor}: FakeQuant with num_bits={quant_range.num_bits}; target {self.target} is int{self.bits}")
        if not quant_range.narrow_range:
            try:
                return qat_log2scale(quant_range.min, quant_range.max, self.bits)
            except ValueError:
                pass
        rounding = "ceil" if self.pow2_rounding == "mse" else self.pow2_rounding  # mse needs statistics: a range has none
        return log2scale(max(-quant_range.min, quant_range.max), self.bits, rounding).log2scale

    def fit_log2scale(self, value: int, what: str, warnings: list[str]) -> int:
        """`value` within the target's log2scale range. Too fine a scale (a range smaller than the
        target resolves, as an untrained network's vanishing activations have) becomes the finest
        the target has, with a warning: nothing saturates, small values lose resolution. Too coarse
        a scale would saturate the tensor: an error."""
        if value > self.max_log2scale:
            warnings.append(f"log2scale {value} is finer than the target's finest, {self.max_log2scale} "
                            f"(target.max_log2scale): quantized at 2^-{self.max_log2scale}, with fewer levels")
            return self.max_log2scale
        if value < self.min_log2scale:
            raise CalibrationError(
                f"{what}: log2scale {value} is outside the target's range [{self.min_log2scale}, {self.max_log2scale}] "
                f"(target.min_log2scale / target.max_log2scale); the tensor's range is too large for {self.target}")
        return value


@dataclass(frozen=True)
class TfliteInt8(QuantScheme):
    """TensorFlow Lite's int8 quantization specification: affine int8 activations, per-channel
    symmetric int8 weights in [-127, 127] (narrow range: -128 never used, so a weight negated
    stays representable), int32 biases at input scale x weight scale with zero point 0."""

    name: ClassVar[str] = "tflite_int8"
    ir_dialect: ClassVar[str] = "tflite_int8"
    accelerated: ClassVar[bool] = True
    bias_bits: ClassVar[int] = 32
    # TFLite's int8 operator specification: SOFTMAX and LOGISTIC output 1/256 with zero point -128, TANH 1/128
    # with 0 (their kernels check it); AVERAGE_POOL_2D, MAX_POOL_2D and the resizes keep their input's
    fixed_outputs = {"Softmax": (1.0 / 256, -128), "Sigmoid": (1.0 / 256, -128), "Tanh": (1.0 / 128, 0)}
    input_quantized_outputs = frozenset({"AvgPool", "MaxPool", "ResizeBilinear", "ResizeNearestNeighbor"})

    def fixed_input_entry(self, stats):
        return None

    def activation_entry(self, choice):
        """The affine range of what the method keeps: the observed span of each sign, cut at the
        method's threshold (minmax: [min, max]; a ReLU's output: [0, T], all 256 levels on it); a
        QAT graph: its FakeQuant's own [min, max]. Zero always inside, exactly representable."""
        if choice.qat_range is not None and choice.qat_range.scale is not None:  # a .tflite's own, bit for bit
            scale, zero_point = choice.qat_range.scale[0], choice.qat_range.zero_point[0]
            quant_range = [(self.qmin - zero_point) * scale, (self.qmax - zero_point) * scale]
        elif choice.qat_range is not None:
            scale, zero_point, quant_range = self.affine(choice.qat_range.min, choice.qat_range.max)
        else:
            low, high = max(-choice.threshold, choice.stats.min), min(choice.threshold, choice.stats.max)
            scale, zero_point, quant_range = self.affine(low, high)
        return TensorEntry("activation", choice.method, choice.threshold, quant_range, scale=scale, zero_point=zero_point)

    def affine(self, low: float, high: float) -> tuple[float, int, list[float]]:
        """(scale, zero point, the range they represent) of [low, high], as TensorFlow Lite's
        converter nudges it: the range widened to hold 0, scale = (high - low) / 255, zero point =
        qmin - low / scale rounded half away from zero and clamped to [qmin, qmax]."""
        low, high = min(float(low), 0.0), max(float(high), 0.0)
        if not (math.isfinite(low) and math.isfinite(high)):
            raise CalibrationError(f"range [{low}, {high}] is not finite")
        scale = (high - low) / (self.qmax - self.qmin) if high > low else 1.0
        zero_point = int(np.clip(round_half_away(self.qmin - low / scale), self.qmin, self.qmax))
        return scale, zero_point, [(self.qmin - zero_point) * scale, (self.qmax - zero_point) * scale]

    def weight_entry(self, layer, weight, channels, weight_method, weigh):
        chosen = [choose_weights(weight_method, channel, self.bits, pow2=False) for channel in channels()]
        scales = [float_scale(channel.threshold, self.bits) for channel in chosen]
        clipped = float(np.mean([channel.saturated_fraction for channel in chosen]))
        return TensorEntry("weight", _weight_method_name(weight_method), max(c.threshold for c in chosen), self._narrow(max(scales)),
                           absmax=_absmax_of(weight), layer=layer, channel_ranges=[self._narrow(s) for s in scales],
                           channel_scales=scales, clipped_fraction=clipped, narrow_range=True)

    def qat_constant_entry(self, kind, key, layer, quant_range, channels):
        if quant_range.num_bits != self.bits:
            raise CalibrationError(f"{key}: FakeQuant with num_bits={quant_range.num_bits}; the {self.name} scheme is int{self.bits}")
        threshold = max(-quant_range.min, quant_range.max)
        scale = float_scale(threshold, self.bits)
        entry = TensorEntry(kind, "qat", threshold, self._narrow(scale), scale=scale, layer=layer, narrow_range=True)
        if quant_range.scale is not None and len(quant_range.scale) == channels:  # a .tflite's own, bit for bit
            entry.channel_scales = list(quant_range.scale)
            entry.channel_ranges = [self._narrow(channel) for channel in entry.channel_scales]
            entry.scale = None
        elif quant_range.channel_min is not None and len(quant_range.channel_min) == channels:
            entry.channel_scales = [float_scale(max(-low, high), self.bits) for low, high in zip(quant_range.channel_min, quant_range.channel_max)]
            entry.channel_ranges = [self._narrow(channel) for channel in entry.channel_scales]
            entry.scale = None
        return entry

    def fit_weight_to_bias(self, layer, bias, input_entry, weight_entry):
        """Each channel whose |bias| is beyond half of int32 at input scale x weight scale gets the weight scale that puts it
        there, 2 |bias| / (input scale x (2^31 - 1)), as TensorFlow Lite's converter does (AdjustWeightsForBiasScale in
        tensorflow/lite/tools/optimize/quantization_utils.cc): a channel whose weights BatchNorm folding left near 0
        (a dead channel: weights ~1e-30, bias ~0.3) has a weight scale of ~1e-32, and its bias no int32. The channel's
        weights, ~0 at the wider scale too, lose nothing; the entry says which channels moved."""
        magnitudes = np.abs(np.asarray(bias, np.float64).reshape(-1))
        if weight_entry.channel_scales is None:  # per tensor: the largest bias decides (the converter's per-layer branch)
            return self._widened(weight_entry, [weight_entry.scale], [float(magnitudes.max(initial=0.0))], input_entry.scale)
        return self._widened(weight_entry, weight_entry.channel_scales, magnitudes.tolist(), input_entry.scale)

    def _widened(self, weight_entry: TensorEntry, scales: list[float], biases: list[float], input_scale: float) -> TensorEntry:
        """`weight_entry` with each channel's scale widened where its bias is beyond half of int32 (a relative 1e-9 over
        it: a scale widened once is not widened again)."""
        half = 0.5 * float(np.iinfo(np.int32).max)
        moved = [(channel, scale, magnitude / (input_scale * half)) for channel, (scale, magnitude) in enumerate(zip(scales, biases))
                 if magnitude > half * input_scale * scale * (1 + 1e-9)]
        if not moved:
            return weight_entry
        widened = list(scales)
        for channel, _, scale in moved:
            widened[channel] = scale
        shown = ", ".join(f"{channel} ({old:.3g} -> {new:.3g})" for channel, old, new in moved[:4]) + (" ..." if len(moved) > 4 else "")
        warning = (f"weight scale widened on {len(moved)} channel(s) so that the bias fits int32 at input scale x weight scale, as "
                   f"TFLite's converter does: {shown}")
        warnings = [*weight_entry.warnings, warning]
        if weight_entry.channel_scales is None:
            return dataclasses.replace(weight_entry, scale=widened[0], range=self._narrow(widened[0]), warnings=warnings)
        return dataclasses.replace(weight_entry, channel_scales=widened, channel_ranges=[self._narrow(value) for value in widened],
                                   range=self._narrow(max(widened)), warnings=warnings)

    def bias_entry(self, layer, bias, input_entry, weight_entry):
        absmax = _absmax_of(bias)
        weight_scales = weight_entry.grid.scales
        return TensorEntry("bias", "accumulator", absmax, [-absmax, absmax], absmax=absmax, layer=layer,
                           channel_scales=[input_entry.scale * s for s in weight_scales])

    def _narrow(self, scale: float) -> list[float]:
        return [-self.qmax * scale, self.qmax * scale]


# every scheme, registered here once: the config's choices (pipeline/config.py's Scheme is made from it), the
# accelerator's, emission's dialect and the target rules all ask these classes
SCHEMES: dict[str, type[QuantScheme]] = {scheme.name: scheme for scheme in (Pow2Symmetric, TfliteInt8)}


def _weight_method_name(weight_method: str) -> str:
    return "absmax" if weight_method == "minmax" else weight_method


def _absmax(stats: TensorStatistics | None) -> float | None:
    return None if stats is None else float(stats.absmax)


def _absmax_of(values: np.ndarray) -> float:
    return float(np.abs(values).max()) if np.size(values) else 0.0


def scheme_of(target, pow2_rounding: str = "ceil") -> QuantScheme:
    """The scheme a target config (conf/target/*.yaml, typed or plain) chooses with `target.scheme`;
    calib.pow2_rounding says how a power-of-two scheme rounds a threshold to its grid."""
    name = getattr(getattr(target, "scheme"), "value", getattr(target, "scheme"))
    return scheme_class(name).from_target(target, pow2_rounding)


def scheme_class(name: str) -> type[QuantScheme]:
    if name not in SCHEMES:
        raise CalibrationError(f"target.scheme={name!r}: not a quantization scheme; choose one of {', '.join(SCHEMES)}")
    return SCHEMES[name]
