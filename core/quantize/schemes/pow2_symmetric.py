"""TF2IR's scheme (seed 000), `pow2_symmetric`: int8 symmetric, one power-of-two scale per tensor
(real = int * 2^-log2scale) within the shifters' range, biases int8 with a log2scale of their own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Optional

import numpy as np

from core.frontend.fake_quant import QuantRange
from core.quantize.calibration.methods import choose_weights, get_method, weight_methods
from core.quantize.calibration.scales import ROUNDINGS, log2scale, qat_log2scale
from core.quantize.calibration.weights import unsaturated_log2scale
from core.quantize.schemes.base import (QuantScheme, absmax_of, absmax_of_stats, clipped_fraction, config_value, pow2_range,
                                        register_scheme, weight_method_name)
from core.quantize.table import CalibrationError, TensorEntry


@dataclass
class Pow2SymmetricSettings:
    """target.scheme of pow2_symmetric (`target/scheme=pow2_symmetric`): int8 symmetric, power-of-two scales per
    tensor (TF2IR, seed 000); the run's integers are TF2IR's (runtime tf2ir)."""

    name: str = "pow2_symmetric"
    bits: int = field(default=8, metadata={"check": "positive"})
    # the network input's log2scale; None (default): chosen from the preprocessed calibration data by calib.method,
    # like every other activation; an integer fixes it
    input_log2scale: Optional[int] = None
    # the log2scales the hardware's shifters can align
    min_log2scale: int = -8
    max_log2scale: int = 16
    # the shifts the IR may contain (host and accelerator)
    min_shift: int = 0
    max_shift: int = field(default=31, metadata={"check": "positive"})

    def errors(self) -> list[str]:
        if self.bits != 8:
            return [f"target.scheme.bits={self.bits}: the calibration table, the IR, the integer kernels and the generated C of "
                    "pow2_symmetric are int8; set target.scheme.bits=8"]
        for low, high in (("min_log2scale", "max_log2scale"), ("min_shift", "max_shift")):
            if getattr(self, low) > getattr(self, high):
                return [f"target.scheme.{low}={getattr(self, low)} is above target.scheme.{high}={getattr(self, high)}: no "
                        f"{low.split('_', 1)[1]} is within [{low}, {high}]; give the range its hardware holds (the defaults: "
                        f"{type(self)().__getattribute__(low)} .. {type(self)().__getattribute__(high)})"]
        if self.input_log2scale is not None and not self.min_log2scale <= self.input_log2scale <= self.max_log2scale:
            return [f"target.scheme.input_log2scale={self.input_log2scale}: must be within target.scheme.min_log2scale="
                    f"{self.min_log2scale} .. target.scheme.max_log2scale={self.max_log2scale} (the network input is a tensor too)"]
        return []


@register_scheme
@dataclass(frozen=True)
class Pow2Symmetric(QuantScheme):
    """TF2IR's: int8 symmetric, a power-of-two scale per tensor within the shifters' range."""

    name: ClassVar[str] = "pow2_symmetric"
    ir_dialect: ClassVar[str] = "tf2ir"
    power_of_two: ClassVar[bool] = True
    accelerated: ClassVar[bool] = True
    settings: ClassVar[type] = Pow2SymmetricSettings
    min_log2scale: int = -8
    max_log2scale: int = 16
    input_log2scale: int | None = None  # an override: None lets the method choose it from the data
    pow2_rounding: str = "ceil"
    target: str = "tf2ir"  # named in messages
    max_shift: int = 31  # the largest left shift the shifters align a bias into the accumulator with (target.scheme.max_shift)

    @classmethod
    def from_settings(cls, settings, target, pow2_rounding):
        return cls(bits=config_value(settings, "bits"), min_log2scale=config_value(settings, "min_log2scale"),
                   max_log2scale=config_value(settings, "max_log2scale"), input_log2scale=config_value(settings, "input_log2scale"),
                   pow2_rounding=pow2_rounding, target=target, max_shift=config_value(settings, "max_shift"))

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
                candidates.append(TensorEntry("weight", weight_method_name(name), chosen.threshold, pow2_range(chosen.log2scale, self.bits),
                                              log2scale=chosen.log2scale, absmax=absmax_of(weight), layer=layer,
                                              clipped_fraction=chosen.saturated_fraction))
        return candidates

    def fixed_input_entry(self, stats):
        if self.input_log2scale is None:
            return None
        quant_range = pow2_range(self.input_log2scale, self.bits)
        return TensorEntry("input", "fixed", -quant_range[0], quant_range, log2scale=self.input_log2scale,
                           absmax=absmax_of_stats(stats), clipped_fraction=clipped_fraction(stats, -quant_range[0]))

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
        return TensorEntry("weight", weight_method_name(weight_method), chosen.threshold, pow2_range(value, self.bits), log2scale=value,
                           absmax=absmax_of(weight), layer=layer, clipped_fraction=chosen.saturated_fraction, warnings=warnings)

    def qat_constant_entry(self, kind, key, layer, quant_range, channels):
        warnings: list[str] = []
        threshold = max(-quant_range.min, quant_range.max)
        value = self.fit_log2scale(self.qat_log2scale(key, quant_range), f"{kind} {key} (layer {layer})", warnings)
        return TensorEntry(kind, "qat", threshold, pow2_range(value, self.bits), log2scale=value, layer=layer, warnings=warnings)

    def bias_entry(self, layer, bias, input_entry, weight_entry):
        """The TF2IR bias is int8 with a log2scale of its own (bias_shift aligns it). bias_shift =
        input + weight - bias log2scale shifts the bias left into the accumulator: a bias finer
        than the accumulator has nothing to land on, so it is rounded at the accumulator's scale."""
        absmax = absmax_of(bias)
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
                f"(target.scheme.max_shift); widen target.scheme.max_shift, or calibrate the layer's input coarser (another calib.method or "
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
                            f"(target.scheme.max_log2scale): quantized at 2^-{self.max_log2scale}, with fewer levels")
            return self.max_log2scale
        if value < self.min_log2scale:
            raise CalibrationError(
                f"{what}: log2scale {value} is outside the target's range [{self.min_log2scale}, {self.max_log2scale}] "
                f"(target.scheme.min_log2scale / target.scheme.max_log2scale); the tensor's range is too large for {self.target}")
        return value
