"""From statistics (or a QAT graph's own ranges) to the calibration table, under
the target's constraints.

One path for every method: a method gives a threshold per activation tensor,
the target turns thresholds into scales (power-of-two log2scales, or float
scales), and every entry records the exact FakeQuant range those scales mean.
For `qat` on a power-of-two target the threshold is the FakeQuant's own
magnitude, so the derived range is the original range to the bit.
Weights and biases are never saturated (seed 002): their threshold is their absmax.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from core.quantize.table import CalibrationTable, TensorEntry
from core.quantize.calibration.bias_correction import bias_correction, channel_response
from core.quantize.calibration.histogram import TensorStatistics
from core.quantize.calibration.methods import CalibrationSettings, get_method, method_for
from core.quantize.calibration.scales import float_scale, log2scale, qat_log2scale
from core.quantize.calibration.weights import choose as choose_weights, unsaturated_log2scale
from core.frontend.fake_quant import QuantRange
from core.frontend.layers import Layer, LayerGraph, QKind


class CalibrationError(ValueError):
    pass


@dataclass(frozen=True)
class TargetSpec:
    """The part of the target config calibration obeys."""

    name: str
    bits: int = 8
    pow2_scales: bool = True
    per_channel_weights: bool = False
    input_log2scale: int | None = None  # an override: None lets the method choose it from the data
    min_log2scale: int = -8
    max_log2scale: int = 16
    pow2_rounding: str = "ceil"

    @property
    def qmax(self) -> int:
        return 2 ** (self.bits - 1) - 1


def pow2_range(log2scale_value: int, bits: int) -> list[float]:
    step = 2.0 ** -log2scale_value
    return [-(2 ** (bits - 1)) * step, (2 ** (bits - 1) - 1) * step]


def scaled_range(scale: float, bits: int) -> list[float]:
    return [-(2 ** (bits - 1)) * scale, (2 ** (bits - 1) - 1) * scale]


def clipped_fraction(stats: TensorStatistics | None, limit: float) -> float | None:
    """Share of the observed values whose magnitude is beyond `limit`. Callers pass the range's
    magnitude -min: |x| cannot tell -2^k (exact) from +2^k (one step past max), and the
    negative side is the one a symmetric int8 range reaches."""
    if stats is None or stats.count == 0 or stats.absmax <= limit:
        return None if stats is None else 0.0
    beyond = stats.bin_centers > limit
    return float(stats.counts[beyond].sum() / stats.counts.sum())


def build_calibration_table(
    layer_graph: LayerGraph,
    method: str,
    target: TargetSpec,
    settings: CalibrationSettings,
    stats: dict[str, TensorStatistics] | None,
    ranges: dict[str, QuantRange],
    input_mean_squares: dict[str, np.ndarray] | None = None,
    float_layers: list[str] = (),
) -> CalibrationTable:
    """`input_mean_squares`: per-channel E[x^2] of weighted layers' inputs; with them weight_method=mse
    weighs each weight's error by its input channel's, so the layer's output error is what it minimizes.
    `float_layers` (calib.keep_float, layer names): their weights and biases get no entries."""
    tensors: dict[str, TensorEntry] = {}
    input_tensor = layer_graph.graph.input_tensor
    ranges = _ranges_across_identities(layer_graph, ranges)
    weight_inputs = {layer_graph.scale_source(layer.inputs[0]) for layer in layer_graph.layers if layer.rule.weight and layer.weight}
    for tensor in layer_graph.quantized_tensors():
        tensor_stats = (stats or {}).get(tensor)
        tensor_method = method_for(method, tensor in weight_inputs and tensor != input_tensor)
        if tensor == input_tensor:
            entry = _input_entry(tensor, tensor_method, target, settings, tensor_stats, ranges)
            if entry is not None:
                tensors[tensor] = entry
            continue
        layer = layer_graph.producer_of(tensor)
        tensors[tensor] = _activation_entry(tensor, layer.name if layer else None, tensor_method, target, settings, tensor_stats, ranges)
    for layer in layer_graph.layers:
        rule = layer.rule
        if layer.name in float_layers:
            continue
        if rule.weight and layer.weight:
            mean_square = (input_mean_squares or {}).get(layer.inputs[0])
            tensors[f"{layer.weight}:0"] = _weight_entry(layer_graph, layer, method, target, ranges, settings.weight_method, mean_square)
        if rule.bias and layer.bias:
            tensors[f"{layer.bias}:0"] = _bias_entry(layer_graph, layer, method, target, ranges, tensors)
    return CalibrationTable(method, target.name, target.bits, tensors, sorted(float_layers))


def _ranges_across_identities(layer_graph: LayerGraph, ranges: dict[str, QuantRange]) -> dict[str, QuantRange]:
    """A FakeQuant after an identity-like layer (the Squeeze after Keras's global pool) holds the
    range of what that layer reads: the same values, the same scale."""
    ranges = dict(ranges)
    for layer in reversed(layer_graph.layers):
        if layer.rule.output is QKind.IDENTITY and layer.output in ranges and layer.inputs[0] not in ranges:
            ranges[layer.inputs[0]] = ranges[layer.output]
    return ranges


def _input_entry(tensor: str, method: str, target: TargetSpec, settings: CalibrationSettings, stats,
                 ranges: dict[str, QuantRange]) -> TensorEntry | None:
    """The network input is a tensor like any other: the method chooses its scale from the preprocessed
    calibration data (a QAT graph: its input FakeQuant's range), so an input in [0, 255] is not clipped to
    [-1, 1). On a power-of-two target target.input_log2scale, when set, fixes it. None: the input stays
    float (a QAT graph without an input FakeQuant on a float-scale target)."""
    if target.pow2_scales and target.input_log2scale is not None:
        quant_range = pow2_range(target.input_log2scale, target.bits)
        return TensorEntry("input", "fixed", -quant_range[0], quant_range, log2scale=target.input_log2scale,
                           absmax=_absmax(stats), clipped_fraction=clipped_fraction(stats, -quant_range[0]))
    if method == "qat" and tensor not in ranges and not target.pow2_scales:
        return None
    entry = _activation_entry(tensor, None, method, target, settings, stats, ranges)
    entry.kind = "input"
    return entry


def _activation_entry(tensor, layer, method, target, settings, stats, ranges) -> TensorEntry:
    warnings: list[str] = []
    if method == "qat" and tensor not in ranges:
        # tfmot leaves some outputs unquantized (a final Softmax): the data decides their range
        if stats is None:
            raise CalibrationError(f"calib.method=qat: tensor {tensor} (layer {layer}) has no FakeQuant in the graph; "
                                   "calibrate this model with minmax, kl, percentile or mse")
        method = "minmax"
        warnings.append("no FakeQuant of its own in the QAT graph: calibrated by minmax over the calibration images")
    if method == "qat":
        settings = dataclasses.replace(settings, fake_quant_range=(ranges[tensor].min, ranges[tensor].max))
    elif stats is None:
        raise CalibrationError(f"tensor {tensor} (layer {layer}) was not observed during calibration")
    threshold = get_method(method).threshold(stats, settings)
    if target.pow2_scales:
        if method == "qat":  # the graph's own range: exactly, when it is a power-of-two one
            value = _qat_log2scale(tensor, ranges[tensor], target)
        elif (exponent := get_method(method).pow2_exponent(stats, settings)) is not None:
            # what the range clips at: 2^k, or nothing beyond absmax when the range holds it
            value, threshold = (target.bits - 1) - exponent, min(float(np.ldexp(1.0, exponent)), float(stats.absmax))
        else:
            chosen = log2scale(threshold, target.bits, target.pow2_rounding, stats)
            value = chosen.log2scale
            warnings += [chosen.warning] if chosen.warning else []
        value = _fit_log2scale(value, target, f"tensor {tensor} (layer {layer})", warnings)
        entry = TensorEntry("activation", method, threshold, pow2_range(value, target.bits), log2scale=value)
    else:
        scale = float_scale(threshold, target.bits)
        entry = TensorEntry("activation", method, threshold, scaled_range(scale, target.bits), scale=scale)
    entry.layer, entry.warnings = layer, warnings
    entry.absmax, entry.clipped_fraction = _absmax(stats), clipped_fraction(stats, -entry.range[0])
    return entry


def _weight_entry(layer_graph: LayerGraph, layer, method: str, target: TargetSpec, ranges, weight_method: str,
                  input_mean_square: np.ndarray | None = None) -> TensorEntry:
    weight = layer_graph.graph.constants[layer.weight]
    key = f"{layer.weight}:0"
    if method == "qat" and key in ranges:
        channels = int(np.prod([weight.shape[axis] for axis in layer.rule.weight_channel_axes])) if layer.rule.weight_channel_axes else 0
        return _qat_constant_entry("weight", key, layer.name, ranges[key], target, channels)
    absmax = float(np.abs(weight).max())
    named = "absmax" if weight_method == "minmax" else weight_method
    weigh = np.mean if input_mean_square is None else (lambda squared: float(channel_response(layer, squared, input_mean_square).sum()))
    if target.pow2_scales:
        warnings: list[str] = []
        chosen = choose_weights(weight_method, weight, target.bits, pow2=True, weigh=weigh)
        value = _fit_log2scale(chosen.log2scale, target, f"weight of layer {layer.name}", warnings)
        return TensorEntry("weight", named, chosen.threshold, pow2_range(value, target.bits), log2scale=value, absmax=absmax,
                           layer=layer.name, clipped_fraction=chosen.saturated_fraction, warnings=warnings)
    if target.per_channel_weights:
        channels = [choose_weights(weight_method, channel, target.bits, pow2=False) for channel in output_channels(weight, layer)]
        scales = [float_scale(channel.threshold, target.bits) for channel in channels]
        clipped = float(np.mean([channel.saturated_fraction for channel in channels]))
        return TensorEntry("weight", named, max(c.threshold for c in channels), scaled_range(max(scales), target.bits), absmax=absmax,
                           layer=layer.name, channel_ranges=[scaled_range(s, target.bits) for s in scales], channel_scales=scales,
                           clipped_fraction=clipped)
    chosen = choose_weights(weight_method, weight, target.bits, pow2=False, weigh=weigh)
    scale = float_scale(chosen.threshold, target.bits)
    return TensorEntry("weight", named, chosen.threshold, scaled_range(scale, target.bits), scale=scale, absmax=absmax,
                       layer=layer.name, clipped_fraction=chosen.saturated_fraction)


def _bias_entry(layer_graph: LayerGraph, layer, method: str, target: TargetSpec, ranges, tensors,
                correction: np.ndarray | None = None) -> TensorEntry:
    """The bias's entry; with a `correction`, the entry of bias + correction, which it records."""
    entry = _uncorrected_bias_entry(layer_graph, layer, method, target, ranges, tensors, correction)
    if correction is not None:
        entry.correction = [float(value) for value in correction]
    return entry


def _uncorrected_bias_entry(layer_graph: LayerGraph, layer, method, target, ranges, tensors, correction) -> TensorEntry:
    bias = layer_graph.graph.constants[layer.bias]
    if correction is not None:
        bias = bias.astype(np.float64) + correction
    key = f"{layer.bias}:0"
    if method == "qat" and key in ranges:
        return _qat_constant_entry("bias", key, layer.name, ranges[key], target)
    absmax = float(np.abs(bias).max())
    if target.pow2_scales:  # the TF2IR bias is int8 with a log2scale of its own (bias_shift aligns it)
        warnings: list[str] = []
        value = _fit_log2scale(unsaturated_log2scale(absmax, target.bits), target, f"bias of layer {layer.name}", warnings)
        # bias_shift = input + weight - bias log2scale shifts the bias left into the accumulator: a bias
        # finer than the accumulator has nothing to land on, so it is rounded at the accumulator's scale
        accumulator = tensors[layer_graph.scale_source(layer.inputs[0])].log2scale + tensors[f"{layer.weight}:0"].log2scale
        value = min(value, accumulator)
        return TensorEntry("bias", "absmax", absmax, pow2_range(value, target.bits), log2scale=value, absmax=absmax, layer=layer.name,
                           warnings=warnings)
    # float-scale targets keep the bias in int32 at the accumulator's scale: input scale x weight scale
    input_scale = tensors[layer_graph.scale_source(layer.inputs[0])].scale
    weight_entry = tensors[f"{layer.weight}:0"]
    weight_scales = weight_entry.channel_scales or [weight_entry.scale]
    return TensorEntry("bias", "accumulator", absmax, [-absmax, absmax], absmax=absmax, layer=layer.name,
                       channel_scales=[input_scale * s for s in weight_scales])


def correct_biases(table: CalibrationTable, layer_graph: LayerGraph, target: TargetSpec,
                   input_means: dict[str, np.ndarray] | None) -> list[dict]:
    """Every bias entry made again from the table's input and weight entries (a bias's log2scale
    is bounded by the accumulator's): with `input_means` (per-channel mean of each weighted
    layer's input over the calibration data), bias correction (calibration/bias_correction.py)
    makes each the entry of bias + correction. Returns per layer what moved."""
    report = []
    for layer in layer_graph.layers:
        if not (layer.rule.weight and layer.rule.bias and layer.weight and layer.bias) or layer.name in table.float_layers:
            continue
        correction = None
        if input_means is not None:
            weight = layer_graph.graph.constants[layer.weight]
            correction = bias_correction(layer, weight, table.tensors[f"{layer.weight}:0"], target.bits, input_means[layer.inputs[0]])
        table.tensors[f"{layer.bias}:0"] = _bias_entry(layer_graph, layer, table.method, target, {}, table.tensors, correction)
        if correction is not None:
            report.append({"layer": layer.name, "max_abs_correction": float(np.abs(correction).max()),
                           "max_abs_bias": float(np.abs(layer_graph.graph.constants[layer.bias]).max())})
    return report


def with_log2scale(entry: TensorEntry, value: int, method: str, bits: int, stats: TensorStatistics | None = None,
                   weight: np.ndarray | None = None) -> TensorEntry:
    """`entry` on a power-of-two target moved to log2scale `value`, chosen by `method`; what it
    clips is measured again: over `stats` (an activation) or the `weight` itself."""
    moved = dataclasses.replace(entry, method=method, log2scale=value, range=pow2_range(value, bits), warnings=list(entry.warnings))
    moved.threshold = -moved.range[0]
    if weight is not None:
        moved.clipped_fraction = float(np.mean(np.abs(weight) > moved.range[1])) if weight.size else 0.0
    elif stats is not None:
        moved.clipped_fraction = clipped_fraction(stats, -moved.range[0])
    return moved


def _qat_constant_entry(kind: str, key: str, layer: str, quant_range: QuantRange, target: TargetSpec,
                        channels: int = 0) -> TensorEntry:
    """A weight's or bias's own FakeQuant range: on a power-of-two target its power-of-two range
    (rounded by target.pow2_rounding when it is not one); on a float-scale target its scale, per
    channel when the FakeQuant has one range per output channel (`channels` of them) and the
    target takes per-channel weights."""
    warnings: list[str] = []
    threshold = max(-quant_range.min, quant_range.max)
    if target.pow2_scales:
        value = _fit_log2scale(_qat_log2scale(key, quant_range, target), target, f"{kind} {key} (layer {layer})", warnings)
        return TensorEntry(kind, "qat", threshold, pow2_range(value, target.bits), log2scale=value, layer=layer, warnings=warnings)
    scale = float_scale(threshold, target.bits)
    entry = TensorEntry(kind, "qat", threshold, scaled_range(scale, target.bits), scale=scale, layer=layer)
    if quant_range.channel_min is not None and len(quant_range.channel_min) == channels and target.per_channel_weights:
        entry.channel_scales = [float_scale(max(-low, high), target.bits) for low, high in zip(quant_range.channel_min, quant_range.channel_max)]
        entry.channel_ranges = [scaled_range(channel, target.bits) for channel in entry.channel_scales]
    return entry


def _qat_log2scale(tensor: str, quant_range: QuantRange, target: TargetSpec) -> int:
    """The FakeQuant's log2scale when its range is a full-range power-of-two one; otherwise
    (an asymmetric, narrow or non-power-of-two range, as tfmot trains them) the power-of-two
    range of its largest magnitude, rounded by target.pow2_rounding (the calibrate stage
    reports every range that changed)."""
    if quant_range.num_bits != target.bits:
        raise CalibrationError(f"{tensor}: FakeQuant with num_bits={quant_range.num_bits}; target {target.name} is int{target.bits}")
    if not quant_range.narrow_range:
        try:
            return qat_log2scale(quant_range.min, quant_range.max, target.bits)
        except ValueError:
            pass
    rounding = "ceil" if target.pow2_rounding == "mse" else target.pow2_rounding  # mse needs statistics: a range has none
    return log2scale(max(-quant_range.min, quant_range.max), target.bits, rounding).log2scale


def _fit_log2scale(value: int, target: TargetSpec, what: str, warnings: list[str]) -> int:
    """`value` within the target's log2scale range. Too fine a scale (a range smaller than the
    target resolves, as an untrained network's vanishing activations have) becomes the finest
    the target has, with a warning: nothing saturates, small values lose resolution. Too coarse
    a scale would saturate the tensor: an error."""
    if value > target.max_log2scale:
        warnings.append(f"log2scale {value} is finer than the target's finest, {target.max_log2scale} "
                        f"(target.max_log2scale): quantized at 2^-{target.max_log2scale}, with fewer levels")
        return target.max_log2scale
    if value < target.min_log2scale:
        raise CalibrationError(
            f"{what}: log2scale {value} is outside the target's range [{target.min_log2scale}, {target.max_log2scale}] "
            f"(target.min_log2scale / target.max_log2scale); the tensor's range is too large for {target.name}"
        )
    return value


def output_channels(weight: np.ndarray, layer: Layer) -> list[np.ndarray]:
    """The weights of each output channel: every axis but those the layer's rule says index the
    output channels (merged in order: a depthwise HWCM weight's channel c * M + m)."""
    axes = [axis % weight.ndim for axis in layer.rule.weight_channel_axes]
    if not axes or axes != list(range(weight.ndim - len(axes), weight.ndim)):
        raise CalibrationError(f"layer {layer.name}: its weight's output channels are axes {list(axes)} of a "
                               f"{weight.ndim}-d weight; per-channel weights need them last")
    flat = weight.reshape(-1, int(np.prod([weight.shape[axis] for axis in axes])))
    return [flat[:, channel] for channel in range(flat.shape[1])]


def _absmax(stats: TensorStatistics | None) -> float | None:
    return None if stats is None else float(stats.absmax)


def qat_range_changes(table: CalibrationTable, layer_graph: LayerGraph, ranges: dict[str, QuantRange]) -> list[dict]:
    """Under calib.method=qat, every tensor whose table range is not its FakeQuant's (a
    non-power-of-two, asymmetric or narrow range rounded for the target), and every constant
    without a FakeQuant of its own (weights re-quantized after a BatchNorm was folded into them)."""
    ranges = _ranges_across_identities(layer_graph, ranges)
    changes = []
    for tensor, entry in sorted(table.tensors.items()):
        quant_range = ranges.get(tensor)
        if quant_range is None:
            if entry.kind != "input":
                changes.append({"tensor": tensor, "kind": entry.kind, "qat_range": None, "range": entry.range,
                                "why": f"no FakeQuant of its own: calibrated by {entry.method}"})
            continue
        qat = [quant_range.min, quant_range.max]
        if not np.allclose(entry.range, qat, rtol=2.0**-20, atol=0.0):
            why = "narrow range" if quant_range.narrow_range else "not a power-of-two range" if entry.log2scale is not None else "a symmetric range"
            changes.append({"tensor": tensor, "kind": entry.kind, "qat_range": qat, "range": entry.range, "why": why})
    return changes
