"""conv, dwconv and fully connected on the tflite_int8 scheme, computing exactly what TFLite's
reference kernels compute (reference_integer_ops::ConvPerChannel, DepthwiseConvPerChannel,
FullyConnected): int32 sums of filter x (input - input zero point) over the window, taps outside the
image skipped (the same as padding with the input's zero point), plus the int32 bias, rescaled per
output channel by a 32-bit multiplier and a shift (core/quantize/tflite_math.py), plus the output zero
point, clamped to the fused activation's range.

The sums are formed in float: every product is an integer below 2^15 in magnitude, and float32 holds every
partial sum exactly where the weights' bound keeps them below 2^24 (`exact_dtype`), float64 below 2^53 (fewer
than 2^37 products), in whatever order they are added; so a float convolution gives the integers the C loops
do. A convolution exact in float32 runs as TensorFlow's float32 Conv2D of (input - zero point) padded with
zeros (oneDNN's direct convolution, several times faster than a window matrix through BLAS; an algorithm
that transformed the values, as Winograd's does, would not be exact, and simulate's layer-by-layer check
against TFLite's reference kernels would name the layer); the others, and a depthwise one, here in numpy."""

from __future__ import annotations

import numpy as np

from core.ir.ops.conv.im2col import window_matrix
from core.ir.window_views import windows
from core.quantize.tflite_compiled import requantize_channels
from core.quantize.tflite_math import quantize_multiplier, requantize

CHUNK_VALUES = 1 << 22  # window-matrix values per chunk of images


def requantization(input_scale: float, weight_scales: np.ndarray, output_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel (multiplier, shift) of input_scale x weight_scale / output_scale, the product
    and quotient in double from the file's float32 scales (PopulateConvolutionQuantizationParams)."""
    pairs = [quantize_multiplier(float(np.float32(input_scale)) * float(np.float32(scale)) / float(np.float32(output_scale)))
             for scale in np.atleast_1d(weight_scales)]
    return np.array([m for m, _ in pairs], np.int64), np.array([s for _, s in pairs], np.int64)


def sum_bounds(weight: np.ndarray, depthwise: bool = False, bits: int = 8) -> np.ndarray:
    """Per output channel, the largest |sum of weight x (input - zero point)| over the window: sum |w| x 255 (int8
    inputs), x 32768 (int16 inputs: zero point 0)."""
    magnitudes = np.abs(weight.astype(np.int64))
    per_channel = magnitudes.reshape(-1, magnitudes.shape[-1]).sum(axis=0) if depthwise else magnitudes.reshape(len(weight), -1).sum(axis=1)
    return per_channel * (255 if bits == 8 else 1 << (bits - 1))


def exact_dtype(weight: np.ndarray, bias: np.ndarray | None, depthwise: bool = False, bits: int = 8):
    """float32 where every partial sum of weight x (input - zero point) is an integer below 2^24 in magnitude,
    which float32 holds exactly in any order of addition; else float64 (below 2^53 for any layer of fewer
    than 2^37 products, of int8 or int16 inputs)."""
    return np.float32 if sum_bounds(weight, depthwise, bits).max(initial=0) < 2**24 else np.float64


def conv_affine(inputs: np.ndarray, input_zero_point: int, weight: np.ndarray, bias: np.ndarray | None, multipliers, shifts,
                output_zero_point: int, activation_range: tuple[int, int], stride, dilation, pads, depthwise: bool = False,
                rounding: str = "double") -> np.ndarray:
    """int8 [N, H, W, C] -> int8 [N, OH, OW, O] (int16 -> int16 with `rounding` "reduced", the 16x8 kernels'). weight:
    conv OHWI, depthwise 1HW(C*M); bias int32 (int64) [O] or None. A few images at a time: the window matrix of a whole
    batch would not fit in memory."""
    dtype = exact_dtype(weight, bias, depthwise, 8 * inputs.dtype.itemsize)
    if dtype is np.float32 and not depthwise and not (max(stride) > 1 and max(dilation) > 1):
        sums = _tensorflow_conv_sums(inputs, input_zero_point, weight, stride, dilation, pads)
        return _requantized(sums, bias, multipliers, shifts, output_zero_point, activation_range, rounding)
    chunk = max(1, CHUNK_VALUES // max(1, inputs[0].size * weight.shape[1] * weight.shape[2]))
    outputs = [_conv_sums(inputs[start : start + chunk], input_zero_point, weight, stride, dilation, pads, depthwise, dtype)
               for start in range(0, len(inputs), chunk)]
    return _requantized(np.concatenate(outputs), bias, multipliers, shifts, output_zero_point, activation_range, rounding)


def _tensorflow_conv_sums(inputs, input_zero_point, weight, stride, dilation, pads) -> np.ndarray:
    """The float32 sums by TensorFlow's Conv2D: exact where exact_dtype says float32 (see the module's docstring)."""
    import tensorflow as tf  # heavy, and only a simulation needs it: imported where the first convolution runs

    top, bottom, left, right = pads
    centered = inputs.astype(np.float32) - np.float32(input_zero_point)
    hwio = np.ascontiguousarray(np.transpose(weight, (1, 2, 3, 0)), np.float32)
    sums = tf.nn.conv2d(centered, hwio, strides=list(stride), padding=[[0, 0], [top, bottom], [left, right], [0, 0]],
                        dilations=list(dilation))
    return sums.numpy()


def _conv_sums(inputs, input_zero_point, weight, stride, dilation, pads, depthwise, dtype) -> np.ndarray:
    _, kh, kw, _ = weight.shape
    if depthwise:
        centered = inputs.astype(dtype) - dtype(input_zero_point)
        patches = windows(centered, (kh, kw), stride, dilation, pads, 0.0)  # padding: (zero point - zero point) = 0
        multiplier = weight.shape[3] // inputs.shape[3]
        per_channel = np.repeat(patches, multiplier, axis=3) if multiplier > 1 else patches
        return np.einsum("nhwcij,ijc->nhwc", per_channel, weight[0].astype(dtype), optimize=True)
    columns, (n, oh, ow) = window_matrix(inputs, input_zero_point, (kh, kw), stride, dilation, pads, dtype)
    return (columns @ weight.reshape(weight.shape[0], -1).T.astype(dtype)).reshape(n, oh, ow, -1)


def fully_connected_affine(inputs: np.ndarray, input_zero_point: int, weight: np.ndarray, bias: np.ndarray | None, multipliers,
                           shifts, output_zero_point: int, activation_range: tuple[int, int], rounding: str) -> np.ndarray:
    """int8 [N, K] -> int8 [N, O]; weight [O, K] (zero point 0, TFLite's symmetric weights); `rounding`: the runtime's
    (core/quantize/runtimes.py: LiteRT's reference FULLY_CONNECTED rounds once, TFLite Micro's twice)."""
    centered = inputs.reshape(len(inputs), -1).astype(np.float64) - input_zero_point
    accumulator = centered @ weight.astype(np.float64).T
    return _requantized(accumulator, bias, multipliers, shifts, output_zero_point, activation_range, rounding=rounding)


def _requantized(accumulator, bias, multipliers, shifts, output_zero_point, activation_range, rounding: str = "double") -> np.ndarray:
    if rounding == "double":  # the convolutions' rounding, compiled (the same integers as requantize)
        return requantize_channels(accumulator, bias, multipliers, shifts, output_zero_point, *activation_range)
    total = np.rint(accumulator).astype(np.int64)
    if bias is not None:
        total = total + bias.astype(np.int64)
    low, high = activation_range
    return requantize(total, multipliers, shifts, output_zero_point, low, high, rounding=rounding)
