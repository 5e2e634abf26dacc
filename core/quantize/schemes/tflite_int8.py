"""TensorFlow Lite's int8 specification (seed 004 [0038]-[0041]), `tflite_int8`: activations int8 affine
(real = (int - zero_point) * scale, zero exactly representable), weights int8 symmetric per output channel in
[-127, 127], biases int32 at input scale x weight scale; its integers are those of a runtime (core/quantize/runtimes.py)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

import numpy as np

from core.frontend.layers import OutputRule
from core.quantize.calibration.methods import choose_weights
from core.quantize.calibration.scales import float_scale
from core.quantize.runtimes import runtimes_of
from core.quantize.schemes.base import QuantScheme, absmax_of, register_scheme, weight_method_name
from core.quantize.table import CalibrationError, TensorEntry
from core.quantize.tflite_math import SIGNED_UNIT_RANGE_OUTPUT, UNIT_RANGE_OUTPUT, round_half_away


# target.scheme.runtime's choices on tflite_int8: its registered runtimes (core/quantize/runtimes.py)
TfliteRuntime = Enum("TfliteRuntime", {name: name for name in runtimes_of("tflite_int8")})


@dataclass
class TfliteInt8Settings:
    """target.scheme of tflite_int8 (`target/scheme=tflite_int8`): TensorFlow Lite's int8 specification."""

    name: str = "tflite_int8"
    bits: int = field(default=8, metadata={"check": "positive"})
    # whose bytes the simulator, the host C and the accelerator compute, and simulate checks every layer against
    # (core/quantize/runtimes.py): litert_reference (LiteRT's reference kernels) | tflm (TensorFlow Lite for Microcontrollers)
    runtime: TfliteRuntime = TfliteRuntime.litert_reference

    def errors(self) -> list[str]:
        return [] if self.bits == 8 else [f"target.scheme.bits={self.bits}: the tflite_int8 scheme is int8 (target/scheme=tflite_int16x8 "
                                          "has 16-bit activations); set target.scheme.bits=8"]


@register_scheme
@dataclass(frozen=True)
class TfliteInt8(QuantScheme):
    """TensorFlow Lite's int8 quantization specification: affine int8 activations, per-channel
    symmetric int8 weights in [-127, 127] (narrow range: -128 never used, so a weight negated
    stays representable), int32 biases at input scale x weight scale with zero point 0."""

    name: ClassVar[str] = "tflite_int8"
    ir_dialect: ClassVar[str] = "tflite_int8"
    accelerated: ClassVar[bool] = True
    settings: ClassVar[type] = TfliteInt8Settings
    bias_bits: ClassVar[int] = 32
    # TFLite's int8 operator specification: its kernels check a bounded output's fixed quantization (SOFTMAX, LOGISTIC,
    # TANH); AVERAGE_POOL_2D, MAX_POOL_2D and the resizes keep their input's
    fixed_outputs = {OutputRule.UNIT_RANGE: UNIT_RANGE_OUTPUT[8], OutputRule.SIGNED_UNIT_RANGE: SIGNED_UNIT_RANGE_OUTPUT[8]}
    input_quantized_outputs = frozenset({OutputRule.KEEPS_INPUT, OutputRule.KEEPS_INPUT_MAXIMA})
    maximum_outputs = frozenset({OutputRule.KEEPS_INPUT_MAXIMA})

    @property
    def weight_bits(self) -> int:
        """The width of its weights' integers."""
        return self.bits

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
        chosen = [choose_weights(weight_method, channel, self.weight_bits, pow2=False) for channel in channels()]
        scales = [float_scale(channel.threshold, self.weight_bits) for channel in chosen]
        clipped = float(np.mean([channel.saturated_fraction for channel in chosen]))
        return TensorEntry("weight", weight_method_name(weight_method), max(c.threshold for c in chosen), self._narrow(max(scales)),
                           absmax=absmax_of(weight), layer=layer, channel_ranges=[self._narrow(s) for s in scales],
                           channel_scales=scales, clipped_fraction=clipped, narrow_range=True, bits=self._own_bits(self.weight_bits))

    def qat_constant_entry(self, kind, key, layer, quant_range, channels):
        if quant_range.num_bits != self.weight_bits:
            raise CalibrationError(f"{key}: FakeQuant with num_bits={quant_range.num_bits}; the {self.name} scheme's weights are "
                                   f"int{self.weight_bits}")
        threshold = max(-quant_range.min, quant_range.max)
        scale = float_scale(threshold, self.weight_bits)
        entry = TensorEntry(kind, "qat", threshold, self._narrow(scale), scale=scale, layer=layer, narrow_range=True,
                            bits=self._own_bits(self.weight_bits))
        if quant_range.scale is not None and len(quant_range.scale) == channels:  # a .tflite's own, bit for bit
            entry.channel_scales = list(quant_range.scale)
            entry.channel_ranges = [self._narrow(channel) for channel in entry.channel_scales]
            entry.scale = None
        elif quant_range.channel_min is not None and len(quant_range.channel_min) == channels:
            entry.channel_scales = [float_scale(max(-low, high), self.weight_bits)
                                    for low, high in zip(quant_range.channel_min, quant_range.channel_max)]
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
        half = 0.5 * float(2 ** (self.bias_bits - 1) - 1)
        moved = [(channel, scale, magnitude / (input_scale * half)) for channel, (scale, magnitude) in enumerate(zip(scales, biases))
                 if magnitude > half * input_scale * scale * (1 + 1e-9)]
        if not moved:
            return weight_entry
        widened = list(scales)
        for channel, _, scale in moved:
            widened[channel] = scale
        shown = ", ".join(f"{channel} ({old:.3g} -> {new:.3g})" for channel, old, new in moved[:4]) + (" ..." if len(moved) > 4 else "")
        warning = (f"weight scale widened on {len(moved)} channel(s) so that the bias fits int{self.bias_bits} at input scale x weight scale, as "
                   f"TFLite's converter does: {shown}")
        warnings = [*weight_entry.warnings, warning]
        if weight_entry.channel_scales is None:
            return dataclasses.replace(weight_entry, scale=widened[0], range=self._narrow(widened[0]), warnings=warnings)
        return dataclasses.replace(weight_entry, channel_scales=widened, channel_ranges=[self._narrow(value) for value in widened],
                                   range=self._narrow(max(widened)), warnings=warnings)

    def bias_entry(self, layer, bias, input_entry, weight_entry):
        absmax = absmax_of(bias)
        weight_scales = weight_entry.grid.scales
        return TensorEntry("bias", "accumulator", absmax, [-absmax, absmax], absmax=absmax, layer=layer,
                           channel_scales=[input_entry.scale * s for s in weight_scales])

    def _narrow(self, scale: float) -> list[float]:
        """A weight's narrow range: [-qmax, qmax] of its width."""
        largest = 2 ** (self.weight_bits - 1) - 1
        return [-largest * scale, largest * scale]

    def _own_bits(self, bits: int) -> int | None:
        """An entry's `bits`: None where they are the table's (TensorEntry.bits)."""
        return None if bits == self.bits else bits
