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

from core.quantize.table import CalibrationError, CalibrationTable, TensorEntry
from core.quantize.calibration.bias_correction import bias_correction, channel_response
from core.quantize.calibration.histogram import TensorStatistics
from core.quantize.calibration.methods import CalibrationSettings, get_method, method_for, methods_from_data, takes_model_ranges
from core.quantize.schemes import ActivationChoice, Pow2Symmetric, QuantScheme, clip_limit, clipped_fraction
from core.frontend.fake_quant import QuantRange
from core.frontend.layers import Layer, LayerGraph, QKind


@dataclass(frozen=True)
class TargetSpec:
    """The part of the target config calibration obeys: its name and its quantization scheme."""

    name: str
    scheme: QuantScheme = Pow2Symmetric()

    @property
    def bits(self) -> int:
        return self.scheme.bits


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
    input_tensors = layer_graph.graph.input_tensors
    ranges = _ranges_across_identities(layer_graph, ranges)
    weight_inputs = {layer_graph.scale_source(layer.inputs[0]) for layer in layer_graph.layers if layer.rule.weight and layer.weight}
    for tensor in layer_graph.quantized_tensors():
        tensor_stats = (stats or {}).get(tensor)
        tensor_method, fallback_reason = method_for(method, tensor in weight_inputs and tensor not in input_tensors, tensor_stats, settings)
        if tensor in input_tensors:
            entry = _input_entry(tensor, tensor_method, target, settings, tensor_stats, ranges)
        else:
            layer = layer_graph.producer_of(tensor)
            entry = _activation_entry(tensor, layer.name if layer else None, tensor_method, target, settings, tensor_stats, ranges)
        if entry is not None:
            entry.fallback_reason = fallback_reason if entry.method == tensor_method else None
            tensors[tensor] = entry
    tensors.update(_ranged_for_maxima(layer_graph, method, target, settings, stats, ranges, tensors))
    tensors.update(_ranged_for_tables(layer_graph, target, settings, stats, ranges, tensors))
    tensors.update(scheme_output_entries(layer_graph, target.scheme, tensors, stats))
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


def scheme_output_entries(layer_graph: LayerGraph, scheme: QuantScheme, tensors: dict[str, TensorEntry],
                          stats: dict[str, TensorStatistics] | None) -> dict[str, TensorEntry]:
    """The outputs whose quantization the scheme's kernels decide, not calibration (QuantScheme.fixed_outputs,
    input_quantized_outputs), in layer order: an output that keeps its input's follows that input's own rule."""
    decided: dict[str, TensorEntry] = {}
    for layer in layer_graph.layers:
        fixed = scheme.fixed_output_entry(layer.output_rule, (stats or {}).get(layer.output))
        if fixed is not None:
            decided[layer.output] = dataclasses.replace(fixed, layer=layer.name)
        elif layer.output_rule in scheme.input_quantized_outputs and layer.output in tensors:
            source = layer_graph.scale_source(layer.inputs[0])
            inherited = decided.get(source) or tensors[source]
            own = (stats or {}).get(layer.output)
            decided[layer.output] = dataclasses.replace(inherited, kind="activation", method="input", layer=layer.name, warnings=[],
                                                        absmax=_absmax(own), clipped_fraction=clipped_fraction(own, clip_limit(inherited)))
    return decided


def _ranged_for_maxima(layer_graph: LayerGraph, method: str, target: TargetSpec, settings: CalibrationSettings,
                       stats: dict[str, TensorStatistics] | None, ranges: dict[str, QuantRange],
                       tensors: dict[str, TensorEntry]) -> dict[str, TensorEntry]:
    """A tensor a max pool reads and keeps the quantization of (QuantScheme.maximum_outputs) ranged for what the maxima
    keep, where the method's threshold on the pool's output is the larger: chosen on all the tensor's values, it clips
    the tail a max selects (a squeeze-excitation's global max: mse's 0.43 where the maxima reach 0.51, 1.7 dB lost)."""
    widened: dict[str, TensorEntry] = {}
    for layer in layer_graph.layers:
        own = (stats or {}).get(layer.output)
        if layer.output_rule not in target.scheme.maximum_outputs or own is None:
            continue
        source = layer_graph.scale_source(layer.inputs[0])
        current = widened.get(source) or tensors.get(source)
        tensor_method, _ = method_for(method, False, own, settings)
        if current is None or current.method != tensor_method or get_method(tensor_method).range_from_model:
            continue  # a range the scheme fixes or the model trained: kept as it is
        candidate = _activation_entry(layer.output, current.layer, tensor_method, target, settings, own, ranges)
        if candidate.threshold > current.threshold:
            source_stats = (stats or {}).get(source)
            widened[source] = dataclasses.replace(
                candidate, kind=current.kind, absmax=current.absmax, clipped_fraction=clipped_fraction(source_stats, clip_limit(candidate)),
                warnings=[*current.warnings, f"ranged for the maxima {layer.name} keeps ({tensor_method} on them: threshold "
                                             f"{candidate.threshold:.4g}, on every value {current.threshold:.4g})"])
        widened.update(_unclipped_before(layer_graph, source, layer.name, target, settings, stats, ranges, {**tensors, **widened}))
    return widened


def _ranged_for_tables(layer_graph: LayerGraph, target: TargetSpec, settings: CalibrationSettings,
                       stats: dict[str, TensorStatistics] | None, ranges: dict[str, QuantRange],
                       tensors: dict[str, TensorEntry]) -> dict[str, TensorEntry]:
    """The output of a lookup of a constant's rows (AnnotateRule.output_of_weight: an Embedding's) ranged for the whole
    constant where the method's range on the data is narrower, as TFLite's converter ranges it: a row the calibration
    data never read (a rare word's) would be clipped, and wrong every time that word comes."""
    widened: dict[str, TensorEntry] = {}
    for layer in layer_graph.layers:
        current = tensors.get(layer.output)
        if not layer.rule.output_of_weight or current is None or get_method(current.method).range_from_model:
            continue  # a range the model trained is kept as it is
        table = TensorStatistics().update(np.asarray(layer_graph.graph.constants[layer.weight], np.float32).reshape(1, -1))
        candidate = _activation_entry(layer.output, layer.name, "minmax", target, settings, table, ranges)
        if candidate.threshold > current.threshold or min(candidate.range) < min(current.range):
            own = (stats or {}).get(layer.output)
            widened[layer.output] = dataclasses.replace(
                candidate, absmax=current.absmax, clipped_fraction=clipped_fraction(own, clip_limit(candidate)),
                warnings=[*current.warnings, f"ranged for every row of its table {layer.weight} (minmax on them: "
                                             f"[{min(candidate.range):.4g}, {max(candidate.range):.4g}]; {current.method} on the "
                                             f"data: [{min(current.range):.4g}, {max(current.range):.4g}])"])
    return widened


def _unclipped_before(layer_graph: LayerGraph, tensor: str, pool: str, target: TargetSpec, settings: CalibrationSettings,
                      stats: dict[str, TensorStatistics] | None, ranges: dict[str, QuantRange],
                      tensors: dict[str, TensorEntry]) -> dict[str, TensorEntry]:
    """The tensors from which element-wise layers whose operations carry their inputs' tails (AnnotateRule.carries_tails)
    compute `tensor`, which a max pool reads, ranged to their absmax (minmax) where the method's threshold clips them:
    the maxima are made of their largest values, which no statistic of the pool's output can range (a
    squeeze-excitation's x clipped at 0.84 of its 0.97 before x * gate reaches a global max: 1.5 dB of end-point SQNR
    lost)."""
    unclipped: dict[str, TensorEntry] = {}
    pending, seen = [tensor], {tensor}
    while pending:
        producer = layer_graph.producer_of(pending.pop())
        if producer is None or producer.rule is None or not producer.rule.carries_tails:
            continue
        for source in dict.fromkeys(layer_graph.scale_source(operand) for operand in producer.inputs):
            current, own = tensors.get(source), (stats or {}).get(source)
            if source in seen or current is None or own is None or get_method(current.method).range_from_model:
                continue  # a range the scheme fixes or the model trained: kept as it is
            seen.add(source)
            pending.append(source)
            candidate = _activation_entry(source, current.layer, "minmax", target, settings, own, ranges)
            if candidate.threshold > current.threshold:
                unclipped[source] = dataclasses.replace(candidate, kind=current.kind, warnings=[
                    *current.warnings, f"not clipped ({current.method}'s threshold {current.threshold:.4g}, its absmax "
                                       f"{candidate.threshold:.4g}): its largest values reach the maxima {pool} keeps"])
    return unclipped


def _ranges_across_identities(layer_graph: LayerGraph, ranges: dict[str, QuantRange]) -> dict[str, QuantRange]:
    """A FakeQuant after an identity-like layer (the Squeeze after Keras's global pool) holds the
    range of what that layer reads: the same values, the same scale."""
    ranges = dict(ranges)
    for layer in reversed(layer_graph.layers):
        if layer.rule.output is QKind.IDENTITY and layer.output in ranges and layer.inputs[0] not in ranges:
            ranges[layer.inputs[0]] = ranges[layer.output]
    return ranges


def _input_entry(tensor: str, method: str, target: TargetSpec, settings: CalibrationSettings, stats,
                 ranges: dict[str, QuantRange]) -> TensorEntry:
    """The network input is a tensor like any other: the method chooses its scale from the preprocessed
    calibration data (a QAT graph: its input FakeQuant's range), so an input in [0, 255] is not clipped to
    [-1, 1). The scheme may fix it instead (target.scheme.input_log2scale on a power-of-two target)."""
    fixed = target.scheme.fixed_input_entry(stats)
    if fixed is not None:
        return fixed
    entry = _activation_entry(tensor, None, method, target, settings, stats, ranges)
    entry.kind = "input"
    return entry


FALLBACK_METHOD = "minmax"  # a tensor a model-range method finds no range for: the data's whole range


def _activation_entry(tensor, layer, method, target, settings, stats, ranges) -> TensorEntry:
    warnings: list[str] = []
    chosen = get_method(method)
    tensor_settings = chosen.settings_for(tensor, settings, ranges)
    if tensor_settings is None:
        # the model left this tensor without a range of its own (tfmot: a final Softmax): the data decides it
        if stats is None:
            raise CalibrationError(f"calib.method={method}: tensor {tensor} (layer {layer}) has no {chosen.model_ranges} in the graph; "
                                   f"calibrate this model with {', '.join(methods_from_data())}")
        warnings.append(f"no {chosen.model_ranges} of its own in the graph: calibrated by {FALLBACK_METHOD} over the calibration images")
        chosen, tensor_settings = get_method(FALLBACK_METHOD), settings
    elif stats is None and not chosen.range_from_model:
        raise CalibrationError(f"tensor {tensor} (layer {layer}) was not observed during calibration")
    threshold = chosen.threshold(stats, tensor_settings)
    own_exponent = target.scheme.power_of_two and not chosen.range_from_model
    choice = ActivationChoice(tensor, layer, chosen.name, threshold, stats, qat_range=ranges[tensor] if chosen.range_from_model else None,
                              pow2_exponent=chosen.pow2_exponent(stats, tensor_settings) if own_exponent else None)
    entry = target.scheme.activation_entry(choice)
    entry.layer, entry.warnings = layer, warnings + entry.warnings
    entry.absmax, entry.clipped_fraction = _absmax(stats), clipped_fraction(stats, clip_limit(entry))
    return entry


def _weight_entry(layer_graph: LayerGraph, layer, method: str, target: TargetSpec, ranges, weight_method: str,
                  input_mean_square: np.ndarray | None = None) -> TensorEntry:
    weight = layer_graph.graph.constants[layer.weight]
    key = f"{layer.weight}:0"
    if takes_model_ranges(method) and key in ranges:
        channels = int(np.prod([weight.shape[axis] for axis in layer.rule.weight_channel_axes])) if layer.rule.weight_channel_axes else 0
        return _qat_constant_entry("weight", key, layer.name, ranges[key], target, channels)
    weigh = np.mean if input_mean_square is None else (lambda squared: float(channel_response(layer, squared, input_mean_square).sum()))
    return target.scheme.weight_entry(layer.name, weight, lambda: output_channels(weight, layer), weight_method, weigh)


def _bias_entry(layer_graph: LayerGraph, layer, method: str, target: TargetSpec, ranges, tensors,
                correction: np.ndarray | None = None) -> TensorEntry:
    """The bias's entry; with a `correction`, the entry of bias + correction, which it records."""
    entry = _uncorrected_bias_entry(layer_graph, layer, method, target, ranges, tensors, correction)
    if correction is not None:
        entry.correction = [float(value) for value in correction]
    return entry


def _uncorrected_bias_entry(layer_graph: LayerGraph, layer, method, target, ranges, tensors, correction) -> TensorEntry:
    """The bias's entry; the weight's entry in `tensors` becomes the one the scheme fits to the bias (TFLite widens a
    channel's weight scale whose bias int32 cannot hold at input scale x weight scale)."""
    bias = layer_graph.graph.constants[layer.bias]
    if correction is not None:
        bias = bias.astype(np.float64) + correction
    key = f"{layer.bias}:0"
    if takes_model_ranges(method) and key in ranges:
        return _qat_constant_entry("bias", key, layer.name, ranges[key], target)
    weight_key = f"{layer.weight}:0"
    input_entry = tensors[layer_graph.scale_source(layer.inputs[0])]
    weight_entry = tensors[weight_key] = target.scheme.fit_weight_to_bias(layer.name, bias, input_entry, tensors[weight_key])
    return target.scheme.bias_entry(layer.name, bias, input_entry, weight_entry)


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
            weight_entry = table.tensors[f"{layer.weight}:0"]
            correction = bias_correction(layer, weight, weight_entry, table.bits_of(weight_entry), input_means[layer.inputs[0]])
        table.tensors[f"{layer.bias}:0"] = _bias_entry(layer_graph, layer, table.method, target, {}, table.tensors, correction)
        if correction is not None:
            report.append({"layer": layer.name, "max_abs_correction": float(np.abs(correction).max()),
                           "max_abs_bias": float(np.abs(layer_graph.graph.constants[layer.bias]).max())})
    return report


def _qat_constant_entry(kind: str, key: str, layer: str, quant_range: QuantRange, target: TargetSpec,
                        channels: int = 0) -> TensorEntry:
    """A weight's or bias's own FakeQuant range, as the target's scheme represents it."""
    return target.scheme.qat_constant_entry(kind, key, layer, quant_range, channels)


def output_channels(weight: np.ndarray, layer: Layer) -> list[np.ndarray]:
    """The weights of each output channel: every axis but those the layer's rule says index the
    output channels (merged in order: a depthwise HWCM weight's channel c * M + m)."""
    axes = [axis % weight.ndim for axis in layer.rule.weight_channel_axes]
    if not axes or axes != list(range(weight.ndim - len(axes), weight.ndim)):
        raise CalibrationError(f"layer {layer.name} ({layer.op}): its weight's output channels are axes {list(axes)} of a "
                               f"{weight.ndim}-d weight, and per-channel weight scales (the target's scheme) need them last; "
                               f"a target with per-tensor weights (target=tf2ir, accel) takes it")
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
            why = "narrow range" if quant_range.narrow_range else entry.grid.range_change
            changes.append({"tensor": tensor, "kind": entry.kind, "qat_range": qat, "range": entry.range, "why": why})
    return changes
