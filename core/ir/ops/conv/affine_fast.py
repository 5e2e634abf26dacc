"""dwconv's tflite_int8 kernel compiled: conv_affine's integers (affine.py), sooner (a depthwise window has
too few products per output for a matrix product to pay; a convolution's run on BLAS, in affine.py).

Per output pixel, each output channel's int32 accumulator takes the window's weight x (input - zero
point) products, taps outside the image skipped as TFLite's reference loops skip them; then the int32
bias, MultiplyByQuantizedMultiplier in 64 bits exactly as tflite_math computes it (a left shift
wrapping to int32, the rounding doubling high multiply, the rounding right shift), the output zero
point and the clamp. int32 is exact where the weight's |sum| per output channel x 255 plus |bias| stays
below 2^31 (`proven`): the only case this path takes; any other runs the BLAS path in affine.py.
One thread: the callers split batches among cores."""

from __future__ import annotations

import numba
import numpy as np

from core.ir.ops.conv.affine import conv_affine, sum_bounds
from core.ir.ops.conv.im2col import output_size
from core.quantize.tflite_compiled import requantize_value

INT32_LIMIT = 2**31 - 1


def proven(weight: np.ndarray, bias: np.ndarray | None) -> bool:
    """Whether int32 accumulators hold every depthwise sum: its bound plus |bias|."""
    worst = sum_bounds(weight, depthwise=True) + (np.abs(bias.astype(np.int64)) if bias is not None else 0)
    return bool(worst.max(initial=0) <= INT32_LIMIT)


@numba.njit(cache=True, nogil=True)
def _dwconv(inputs, input_zero_point, weight, bias, multipliers, shifts, output_zero_point, low, high,
            stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, out):  # pragma: no cover  (compiled)
    """inputs [N, H, W, C] int8; weight [KH, KW, C * M] int32; out [N, OH, OW, C * M] int8 (channel c * M + m)."""
    n_images, height, width, channels = inputs.shape
    _, out_h, out_w, outputs = out.shape
    kernel_h, kernel_w = weight.shape[0], weight.shape[1]
    multiplier_of_depth = outputs // channels
    acc = np.empty(outputs, np.int32)
    for image in range(n_images):
        for oh in range(out_h):
            for ow in range(out_w):
                acc[:] = bias
                for i in range(kernel_h):
                    y = oh * stride_h - pad_top + i * dilation_h
                    if y < 0 or y >= height:
                        continue
                    for j in range(kernel_w):
                        x = ow * stride_w - pad_left + j * dilation_w
                        if x < 0 or x >= width:
                            continue
                        source, tap = inputs[image, y, x], weight[i, j]
                        for o in range(outputs):
                            acc[o] += (np.int32(source[o // multiplier_of_depth]) - input_zero_point) * tap[o]
                target = out[image, oh, ow]
                for o in range(outputs):
                    target[o] = requantize_value(acc[o], multipliers[o], shifts[o], output_zero_point, low, high)


def conv_affine_fast(inputs: np.ndarray, input_zero_point: int, weight: np.ndarray, bias: np.ndarray | None, multipliers, shifts,
                     output_zero_point: int, activation_range: tuple[int, int], stride, dilation, pads,
                     depthwise: bool = False) -> np.ndarray:
    """conv_affine's integers, sooner: a depthwise conv compiled where int32 is proven exact (a convolution's
    sums are BLAS's, which compiled loops do not beat), every other case conv_affine itself."""
    if not (depthwise and proven(weight, bias)):
        return conv_affine(inputs, input_zero_point, weight, bias, multipliers, shifts, output_zero_point, activation_range, stride,
                           dilation, pads, depthwise=depthwise)
    _, kernel_h, kernel_w, outputs = weight.shape  # 1HW(C*M)
    out = np.empty((len(inputs), *output_size(inputs.shape[1:3], (kernel_h, kernel_w), stride, dilation, pads), outputs), np.int8)
    bias32 = np.zeros(outputs, np.int32) if bias is None else bias.astype(np.int32)
    multipliers, shifts = (np.broadcast_to(np.asarray(values, np.int64), (outputs,)).copy() for values in (multipliers, shifts))
    _dwconv(np.ascontiguousarray(inputs), np.int32(input_zero_point), np.ascontiguousarray(weight[0].astype(np.int32)), bias32,
            multipliers, shifts, np.int64(output_zero_point), np.int64(activation_range[0]), np.int64(activation_range[1]),
            stride[0], stride[1], dilation[0], dilation[1], pads[0], pads[2], out)
    return out
