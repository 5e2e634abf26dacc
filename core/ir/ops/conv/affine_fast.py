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

from core.ir.ops.conv.affine import conv_affine
from core.quantize.tflite_compiled import requantize_value

INT32_LIMIT = 2**31 - 1


def proven(weight: np.ndarray, bias: np.ndarray | None, depthwise: bool) -> bool:
    """Whether int32 accumulators hold every sum: sum |w| x 255 (|input - zero point| <= 255) + |bias|."""
    flat = np.abs(weight.astype(np.int64))
    per_channel = flat.reshape(-1, flat.shape[-1]).sum(axis=0) if depthwise else flat.reshape(flat.shape[0], -1).sum(axis=1)
    worst = per_channel * 255 + (np.abs(bias.astype(np.int64)) if bias is not None else 0)
    return bool(worst.max(initial=0) <= INT32_LIMIT)


@numba.njit(cache=True, nogil=True)
def _conv(inputs, input_zero_point, weight, bias, multipliers, shifts, output_zero_point, low, high,
          stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, depthwise, out):  # pragma: no cover  (compiled)
    """inputs [N, H, W, C] int8; weight [KH, KW, C, O] int32 (depthwise: [KH, KW, 1, O]); out [N, OH, OW, O] int8.
    The output channels are the inner loop: one input value times a row of weights, which vectorizes."""
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
                        source = inputs[image, y, x]
                        if depthwise:
                            tap = weight[i, j, 0]
                            for o in range(outputs):
                                acc[o] += (np.int32(source[o // multiplier_of_depth]) - input_zero_point) * tap[o]
                        else:
                            for c in range(channels):
                                value = np.int32(source[c]) - input_zero_point
                                row = weight[i, j, c]
                                for o in range(outputs):
                                    acc[o] += value * row[o]
                target = out[image, oh, ow]
                for o in range(outputs):
                    target[o] = requantize_value(acc[o], multipliers[o], shifts[o], output_zero_point, low, high)


def conv_affine_compiled(inputs: np.ndarray, input_zero_point: int, weight: np.ndarray, bias: np.ndarray | None, multipliers, shifts,
                         output_zero_point: int, activation_range: tuple[int, int], stride, dilation, pads, out_size,
                         depthwise: bool) -> np.ndarray:
    outputs = weight.shape[3] if depthwise else weight.shape[0]
    out = np.empty((len(inputs), out_size[0], out_size[1], outputs), np.int8)
    bias32 = np.zeros(outputs, np.int32) if bias is None else bias.astype(np.int32)
    per_channel = [np.broadcast_to(np.asarray(values, np.int64), (outputs,)).copy() for values in (multipliers, shifts)]
    # conv OHWI -> HWIO; depthwise 1HW(C*M) -> HW1(C*M)
    weight_hwio = np.ascontiguousarray((weight.transpose(1, 2, 0, 3) if depthwise else weight.transpose(1, 2, 3, 0)).astype(np.int32))
    _conv(np.ascontiguousarray(inputs), np.int32(input_zero_point), weight_hwio, bias32, per_channel[0], per_channel[1],
          np.int64(output_zero_point), np.int64(activation_range[0]), np.int64(activation_range[1]), stride[0], stride[1],
          dilation[0], dilation[1], pads[0], pads[2], depthwise, out)
    return out


def conv_affine_fast(inputs: np.ndarray, input_zero_point: int, weight: np.ndarray, bias: np.ndarray | None, multipliers, shifts,
                     output_zero_point: int, activation_range: tuple[int, int], stride, dilation, pads,
                     depthwise: bool = False) -> np.ndarray:
    """conv_affine's integers, sooner: a depthwise conv compiled where int32 is proven exact (a convolution's
    sums are BLAS's, which the compiled loops do not beat), every other case conv_affine itself."""
    if not (depthwise and proven(weight, bias, depthwise)):
        return conv_affine(inputs, input_zero_point, weight, bias, multipliers, shifts, output_zero_point, activation_range, stride,
                           dilation, pads, depthwise=depthwise)
    (_, height, width, _), (_, kernel_h, kernel_w, _) = inputs.shape, weight.shape
    top, bottom, left, right = pads
    out_size = ((height + top + bottom - (kernel_h - 1) * dilation[0] - 1) // stride[0] + 1,
                (width + left + right - (kernel_w - 1) * dilation[1] - 1) // stride[1] + 1)
    return conv_affine_compiled(inputs, input_zero_point, weight, bias, multipliers, shifts, output_zero_point, activation_range,
                                stride, dilation, pads, out_size, depthwise)
