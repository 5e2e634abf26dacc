"""conv, dwconv and fully connected on the tflite_int8 scheme, computing exactly what TFLite's
reference kernels compute (reference_integer_ops::ConvPerChannel, DepthwiseConvPerChannel,
FullyConnected): int32 sums of filter x (input - input zero point) over the window, taps outside the
image skipped (the same as padding with the input's zero point), plus the int32 bias, rescaled per
output channel by a 32-bit multiplier and a shift (core/quantize/tflite_math.py), plus the output zero
point, clamped to the fused activation's range.

The sums are formed as float64 matrix products: every product is below 2^15 in magnitude and a sum of
fewer than 2^37 of them is an integer float64 holds exactly, so BLAS gives the integers the C loops do."""

from __future__ import annotations

import numpy as np

from core.quantize.tflite_math import quantize_multiplier, requantize

EXACT_PRODUCTS = 1 << 37  # float64 sums of |int8 x (int8 - zero point)| < 2^15 stay exact below this count


def requantization(input_scale: float, weight_scales: np.ndarray, output_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel (multiplier, shift) of input_scale x weight_scale / output_scale, the product
    and quotient in double from the file's float32 scales (PopulateConvolutionQuantizationParams)."""
    pairs = [quantize_multiplier(float(np.float32(input_scale)) * float(np.float32(scale)) / float(np.float32(output_scale)))
             for scale in np.atleast_1d(weight_scales)]
    return np.array([m for m, _ in pairs], np.int64), np.array([s for _, s in pairs], np.int64)


def padding(size: int, kernel: int, stride: int, dilation: int, same: bool) -> tuple[int, int, int]:
    """(output size, padding before, after) as TFLite computes them (ComputePaddingHeightWidth): SAME's
    smaller half first."""
    effective = (kernel - 1) * dilation + 1
    out = (size + stride - 1) // stride if same else (size + stride - effective) // stride
    total = max((out - 1) * stride + effective - size, 0)
    return out, total // 2, total - total // 2


def windows(values: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
            pads: tuple[int, int, int, int], fill: float) -> np.ndarray:
    """[N, OH, OW, C, KH, KW] views of `values` [N, H, W, C] padded with `fill` (top, bottom, left, right)."""
    top, bottom, left, right = pads
    padded = np.pad(values, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    spans = np.lib.stride_tricks.sliding_window_view(padded, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(1, 2))
    return spans[:, ::sh, ::sw, :, ::dh, ::dw]


def conv_affine(inputs: np.ndarray, input_zero_point: int, weight: np.ndarray, bias: np.ndarray | None, multipliers, shifts,
                output_zero_point: int, activation_range: tuple[int, int], stride, dilation, pads, depthwise: bool = False) -> np.ndarray:
    """int8 [N, H, W, C] -> int8 [N, OH, OW, O]. weight: conv OHWI, depthwise 1HW(C*M); bias int32 [O] or None."""
    _, kh, kw, _ = weight.shape
    centered = inputs.astype(np.float64) - input_zero_point
    patches = windows(centered, (kh, kw), stride, dilation, pads, 0.0)  # padding: (zero point - zero point) = 0
    if depthwise:
        multiplier = weight.shape[3] // inputs.shape[3]
        per_channel = np.repeat(patches, multiplier, axis=3) if multiplier > 1 else patches
        accumulator = np.einsum("nhwcij,ijc->nhwc", per_channel, weight[0].astype(np.float64), optimize=True)
    else:
        n, oh, ow = patches.shape[:3]
        columns = patches.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, -1)
        accumulator = (columns @ weight.reshape(weight.shape[0], -1).T.astype(np.float64)).reshape(n, oh, ow, -1)
    return _requantized(accumulator, bias, multipliers, shifts, output_zero_point, activation_range)


def fully_connected_affine(inputs: np.ndarray, input_zero_point: int, weight: np.ndarray, bias: np.ndarray | None, multipliers,
                           shifts, output_zero_point: int, activation_range: tuple[int, int]) -> np.ndarray:
    """int8 [N, K] -> int8 [N, O]; weight [O, K] (zero point 0, TFLite's symmetric weights)."""
    centered = inputs.reshape(len(inputs), -1).astype(np.float64) - input_zero_point
    accumulator = centered @ weight.astype(np.float64).T
    # TensorFlow 2.21's reference FULLY_CONNECTED rounds once (its convolutions twice): measured against it
    return _requantized(accumulator, bias, multipliers, shifts, output_zero_point, activation_range, rounding="single")


def _requantized(accumulator, bias, multipliers, shifts, output_zero_point, activation_range, rounding: str = "double") -> np.ndarray:
    total = np.rint(accumulator).astype(np.int64)
    if bias is not None:
        total = total + bias.astype(np.int64)
    return requantize(total, multipliers, shifts, output_zero_point, *activation_range, rounding=rounding)
