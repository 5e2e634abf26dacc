"""Bias correction (`calib.bias_correction`), Nagel et al. (ICCV 2019), section 4.2, the
empirical variant: quantizing a layer's weights W to W_q adds e = W_q - W, which shifts the
layer's output by E[e x], a per-output-channel bias that nothing downstream averages away
(per-tensor scales make e large on the channels with small weights). With the per-channel
means of the layer's input over the calibration data, E[e x] = e applied to E[x] (exact for a
1x1 conv or a dense layer; for a wider window it ignores that padded borders read zeros), and
the correction subtracts it from the bias the layer adds, so the quantized layer's expected
output is the float one's.

The correction is stored in the calibration table's bias entry (`correction`), never in the
float graph, which stays the function the quantized one is measured against; annotate and
emit-IR quantize bias + correction.
"""

from __future__ import annotations

import numpy as np

from core.frontend.layers import Layer
from core.quantize.table import TensorEntry


def dequantized(values: np.ndarray, entry: TensorEntry, bits: int) -> np.ndarray:
    """`values` as the table's entry quantizes them: a power-of-two step, a float scale, or one
    scale per output channel (the last axis, after merging the rule's channel axes)."""
    return entry.grid.fake_quantized(values, bits)


# output channel axes of a 4-D weight -> its response to one value per input channel: conv HWIO, dwconv HWCM (channel
# c * M + m), a transposed conv's TensorFlow filter HWOI
WEIGHT_LAYOUTS = {(-1,): "hwio,i->o", (-2, -1): "hwcm,c->cm", (-2,): "hwoi,i->o"}


def channel_response(layer: Layer, weight: np.ndarray, per_input_channel: np.ndarray) -> np.ndarray:
    """Per output channel, the layer's weights applied to one value per input channel at every
    window position (a constant input): conv HWIO, dwconv HWCM (channel c * M + m), deconv HWOI, dense [K, C]."""
    weight = np.asarray(weight, dtype=np.float64)
    vector = np.asarray(per_input_channel, dtype=np.float64)
    if weight.ndim == 2:
        return vector @ weight
    # the weight's layout, from the axes its rule says index the output channels
    layout = WEIGHT_LAYOUTS.get(tuple(layer.rule.weight_channel_axes))
    if layout is None:
        raise ValueError(f"layer {layer.name}: no per-channel response for output channel axes {layer.rule.weight_channel_axes}")
    return np.einsum(layout, weight, vector).reshape(-1)


def output_shift(layer: Layer, weight: np.ndarray, quantized_weight: np.ndarray, input_mean: np.ndarray) -> np.ndarray:
    """E[(W_q - W) x] per output channel."""
    return channel_response(layer, np.asarray(quantized_weight, np.float64) - np.asarray(weight, np.float64), input_mean)


def bias_correction(layer: Layer, weight: np.ndarray, weight_entry: TensorEntry, bits: int, input_mean: np.ndarray) -> np.ndarray:
    """What to add to the layer's bias: minus the output shift its quantized weights cause."""
    return -output_shift(layer, weight, dequantized(weight, weight_entry, bits), input_mean)
