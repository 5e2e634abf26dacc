"""Cross-layer equalization (`calib.equalize`), Nagel et al., "Data-Free Quantization through
Weight Equalization and Bias Correction" (ICCV 2019), section 4.1.

A per-tensor scale serves a weight whose output channels span very different ranges badly
(ssd_mbv2's first depthwise weights reach 355 where other channels stay below 1). ReLU is
scale-equivariant, ReLU(x / s) = ReLU(x) / s for s > 0, so for two layers in a row, W1 then
W2 reading only W1's output, dividing W1's output channel i (and its bias) by s_i and
multiplying W2's input channel i by s_i leaves the network's function unchanged. With
s_i = sqrt(r1_i / r2_i) (r1_i: the range of W1's output channel i, r2_i: of W2's input channel
i) both become sqrt(r1_i * r2_i), which maximizes the precision the two per-tensor scales
give. Every such pair is equalized in turn, in passes, until no scale moves by more than
`tolerance` (a layer between two others takes part in two pairs).

ReLU6 clamps at 6, which a per-channel scale would move. Two ways (`relu6`):
- "keep" (the default): the clamp stays, and a channel is scaled only where the clamp provably
  cannot act: its worst-case pre-activation, b_i + sum |W1[.., i]| * absmax(input channel),
  with each input channel's largest magnitude seen in calibration (the quantized network clips
  its inputs to the calibrated range anyway), stays below 6 after scaling
  (s_i >= bound_i / 6); every other channel keeps scale 1. Measured on ssd_mbv2 (QAT-trained
  with ReLU6): the outliers that defeat per-tensor scales (a depthwise channel of 355, fed by a
  channel the previous ReLU6 always zeroes) are all on provably safe channels.
- "relu": as the paper's experiments and AIMET do, an equalized pair's ReLU6 becomes a ReLU.
  This changes the float function where the clamp was live: on ssd_mbv2 the float end points
  move to 7.7 dB SQNR against the original, so it is a choice, not the default.
The calibrate stage measures the change either way (max abs difference at the end points).

Only what is provably safe is paired: layers whose weight layout is one of EQUALIZED_LAYOUTS (conv, dwconv with
channel multiplier 1), not dense ones; the first's output read by the second alone and not an end point; each weight constant
read by that layer alone.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from core.frontend.graph import Graph, canonical_tensor, tensor_node
from core.frontend.layers import GraphIndex, Layer, LayerGraph
from core.quantize.calibration.bias_correction import channel_response

# the weight layouts a pair can be equalized through, by the output channel axes the operation's rule declares: the
# input channels on the second axis from the end (conv HWIO; dwconv HWCM with M = 1), each output channel one input
# channel's of the next layer
EQUALIZED_LAYOUTS = {(-1,): "HWIO", (-2, -1): "HWCM"}
SCALE_EQUIVARIANT = ("None", "Relu")
CLAMPED = {"Relu6": "Relu"}  # activation -> what it becomes in an equalized pair
DEFAULT_TOLERANCE = 1e-3
DEFAULT_MAX_PASSES = 100


@dataclass
class EqualizedPair:
    first: str
    second: str
    activation: str  # the first layer's activation before equalization
    scale_min: float  # the product of the scales each channel was divided by, over all passes
    scale_max: float
    range_ratio_before: float  # max / min over channels of the first layer's output-channel ranges
    range_ratio_after: float


@dataclass
class Equalization:
    graph: Graph
    pairs: list[EqualizedPair] = field(default_factory=list)
    passes: int = 0
    converged: bool = True
    activations_replaced: list[str] = field(default_factory=list)  # the ReLU6 nodes that became ReLU

    def to_dict(self) -> dict:
        return {"pairs": [dataclasses.asdict(pair) for pair in self.pairs], "passes": self.passes,
                "converged": self.converged, "activations_replaced": self.activations_replaced}


def _output_axes(layer: Layer, weight: np.ndarray) -> tuple[int, ...]:
    return tuple(axis % weight.ndim for axis in layer.rule.weight_channel_axes)


def output_channel_ranges(layer: Layer, weight: np.ndarray) -> np.ndarray:
    """max |w| per output channel, over every other axis (conv HWIO over H, W, I; dwconv HWC1 over H, W)."""
    axes = _output_axes(layer, weight)
    return np.abs(weight).max(axis=tuple(axis for axis in range(weight.ndim) if axis not in axes)).reshape(-1)


def input_channel_ranges(layer: Layer, weight: np.ndarray) -> np.ndarray:
    """max |w| per input channel, the second axis from the end in every EQUALIZED_LAYOUTS (HWIO, HWC1)."""
    return np.abs(weight).max(axis=tuple(axis for axis in range(weight.ndim) if axis != weight.ndim - 2))


def _per_output_channel(layer: Layer, weight: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """`scales` (one per output channel) shaped to broadcast against the weight."""
    axes = _output_axes(layer, weight)
    return scales.reshape([weight.shape[axis] if axis in axes else 1 for axis in range(weight.ndim)])


def equalizable_pairs(layer_graph: LayerGraph) -> list[tuple[Layer, Layer]]:
    """(first, second) for every pair the module docstring allows, in execution order."""
    graph = layer_graph.graph
    readers = {tensor: [node.name for node in nodes] for tensor, nodes in GraphIndex(graph).readers.items()}
    layer_readers: dict[str, list[Layer]] = {}
    for layer in layer_graph.layers:
        for tensor in layer.inputs:
            layer_readers.setdefault(tensor, []).append(layer)
    end_points = {canonical_tensor(tensor) for tensor in graph.end_points}

    def eligible(layer: Layer) -> bool:
        if tuple(layer.rule.weight_channel_axes) not in EQUALIZED_LAYOUTS or layer.weight is None or getattr(layer.attrs, "dense", False):
            return False
        weight = graph.constants[layer.weight]
        axes = _output_axes(layer, weight) if weight.ndim == 4 else ()
        # the output channels are one axis's (a depthwise multiplier of 1): each one input channel's of the next layer
        if weight.ndim != 4 or int(np.prod([weight.shape[axis] for axis in axes])) != weight.shape[axes[0]]:
            return False
        return all(len(readers.get(f"{const}:0", [])) == 1 for const in (layer.weight, layer.bias) if const)

    pairs = []
    for first in layer_graph.layers:
        if not eligible(first) or first.output in end_points:
            continue
        if first.activation not in SCALE_EQUIVARIANT and first.activation not in CLAMPED:
            continue
        seconds = layer_readers.get(first.output, [])
        if len(seconds) != 1 or not eligible(seconds[0]):
            continue
        second = seconds[0]
        # the second layer's own nodes (a folded Pad) may read the tensor; nothing else may
        outside = [name for name in readers.get(first.output, []) if name not in second.nodes]
        if not outside:
            pairs.append((first, second))
    return pairs


RELU6_MODES = ("keep", "relu")
CLAMP = 6.0


def clamped_layer_inputs(layer_graph: LayerGraph) -> dict[str, str]:
    """First layer of an equalizable pair whose activation clamps -> its input tensor, whose
    per-channel largest magnitudes `equalize(relu6="keep")` needs."""
    return {first.name: first.inputs[0] for first, _ in equalizable_pairs(layer_graph) if first.activation in CLAMPED}


def equalize(layer_graph: LayerGraph, relu6: str = "keep", input_absmax: dict[str, np.ndarray] | None = None,
             tolerance: float = DEFAULT_TOLERANCE, max_passes: int = DEFAULT_MAX_PASSES) -> Equalization:
    """The graph with every equalizable pair equalized (a new Graph; `layer_graph` is unchanged).
    `input_absmax`: per channel, the largest magnitude of the input of each layer that
    `clamped_layer_inputs` names (relu6="keep" only)."""
    if relu6 not in RELU6_MODES:
        raise ValueError(f"relu6={relu6!r}: choose one of {', '.join(RELU6_MODES)}")
    graph = layer_graph.graph
    pairs = equalizable_pairs(layer_graph)
    bounds = [_with_bias_bound(first, graph, *_scale_bounds(first, relu6, graph, input_absmax or {})) for first, _ in pairs]
    constants = dict(graph.constants)
    for first, second in pairs:
        for const in (first.weight, first.bias, second.weight):
            if const:
                constants[const] = np.array(graph.constants[const], dtype=np.float64)
    ratio_before = [_range_ratio(output_channel_ranges(first, constants[first.weight])) for first, _ in pairs]
    total = [np.ones(output_channel_ranges(first, constants[first.weight]).shape) for first, _ in pairs]
    passes, converged = 0, not pairs
    while pairs and passes < max_passes:
        passes += 1
        largest_move = 0.0
        for position, (first, second) in enumerate(pairs):
            wanted = total[position] * _pair_scales(first, second, constants)
            lower, upper = bounds[position]
            scales = np.clip(wanted, lower, upper) / total[position]
            _apply(first, second, scales, constants)
            total[position] *= scales
            largest_move = max(largest_move, float(np.max(np.abs(np.log(scales)))))
        if largest_move <= np.log1p(tolerance):
            converged = True
            break
    for first, second in pairs:
        for const in (first.weight, first.bias, second.weight):
            if const:
                constants[const] = constants[const].astype(graph.constants[const].dtype)
    # a fused activation's node is the one producing the layer's output
    replaced = {tensor_node(first.output): CLAMPED[first.activation] for first, _ in pairs
                if first.activation in CLAMPED and relu6 == "relu"}
    nodes = [dataclasses.replace(node, op=replaced[node.name]) if node.name in replaced else node for node in graph.nodes]
    equalized = Graph(nodes, constants, list(graph.input_tensors), list(graph.end_points),
                      {**graph.source, "equalized": bool(pairs)})
    result = Equalization(equalized, passes=passes, converged=converged, activations_replaced=sorted(replaced))
    for position, (first, second) in enumerate(pairs):
        result.pairs.append(EqualizedPair(
            first.name, second.name, first.activation, float(total[position].min()), float(total[position].max()),
            ratio_before[position], _range_ratio(output_channel_ranges(first, constants[first.weight]))))
    return result


def _scale_bounds(first: Layer, relu6: str, graph: Graph, input_absmax: dict[str, np.ndarray]) -> tuple:
    """[lower, upper] of each channel's total scale: unbounded unless a kept clamp bounds it."""
    if first.activation not in CLAMPED or relu6 == "relu":
        return 0.0, np.inf
    if first.name not in input_absmax:
        raise ValueError(f"layer {first.name}: equalizing through its {first.activation} with relu6=keep needs the "
                         f"per-channel largest magnitudes of its input {first.inputs[0]}")
    bound = worst_case_preactivation(first, graph, np.asarray(input_absmax[first.name], dtype=np.float64))
    safe = bound < CLAMP
    lower = np.where(safe, np.maximum(bound, 0.0) / CLAMP, 1.0)
    upper = np.where(safe, np.inf, 1.0)
    return lower, upper


def _with_bias_bound(first: Layer, graph: Graph, lower, upper) -> tuple:
    """Dividing a channel by s divides its bias too: s_i >= |b_i| / max |b| keeps the bias's range
    where it was. A per-tensor bias scale (TF2IR's biases are int8) would otherwise lose every
    other channel's bias to one dead channel's (ssd_mbv2: a bias of -3.2 grew to -329)."""
    if not first.bias:
        return lower, upper
    bias = np.abs(graph.constants[first.bias].astype(np.float64))
    largest = bias.max()
    if largest == 0.0:
        return lower, upper
    lower = np.maximum(lower, bias / largest)
    return lower, np.maximum(upper, lower)


def worst_case_preactivation(layer: Layer, graph: Graph, input_absmax: np.ndarray) -> np.ndarray:
    """Per output channel, the largest pre-activation any input within `input_absmax` (per
    input channel) can produce: bias + sum over the window of |w| * absmax."""
    bias = graph.constants[layer.bias].astype(np.float64) if layer.bias else 0.0
    return bias + channel_response(layer, np.abs(graph.constants[layer.weight]), input_absmax)


def _pair_scales(first: Layer, second: Layer, constants: dict[str, np.ndarray]) -> np.ndarray:
    r1 = output_channel_ranges(first, constants[first.weight])
    r2 = input_channel_ranges(second, constants[second.weight])
    if r1.shape != r2.shape:
        raise ValueError(f"layers {first.name} -> {second.name}: {r1.size} output channels feed {r2.size} input channels")
    scales = np.ones_like(r1)
    usable = (r1 > 0) & (r2 > 0)  # a dead channel has nothing to balance
    scales[usable] = np.sqrt(r1[usable] / r2[usable])
    return scales


def _apply(first: Layer, second: Layer, scales: np.ndarray, constants: dict[str, np.ndarray]) -> None:
    constants[first.weight] = constants[first.weight] / _per_output_channel(first, constants[first.weight], scales)
    if first.bias:
        constants[first.bias] = constants[first.bias] / scales
    # conv HWIO and dwconv HWC1 alike: the input channel is the second axis from the end
    constants[second.weight] = constants[second.weight] * scales[:, np.newaxis]


def _range_ratio(ranges: np.ndarray) -> float:
    live = ranges[ranges > 0]
    return float(live.max() / live.min()) if live.size else 1.0
