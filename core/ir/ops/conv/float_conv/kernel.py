"""The float_conv / float_dwconv kernel in numpy float32, in the record's order of operations
(record.py), so the C backend's loops give the same bits: every product and sum is one float32
operation, taps are added in the order kh, kw, ci, starting from the bias."""

from __future__ import annotations

import numpy as np

from core.ir.fixedpoint import INT8_MAX, INT8_MIN, quantize


def dequantized_float32(ints: np.ndarray, log2scale: int) -> np.ndarray:
    """int8 * 2^-log2scale in float32: exact (8 significant bits times a power of two)."""
    return np.asarray(ints, np.float32) * np.float32(2.0**-log2scale)


def float_conv_kernel(record, params: dict, inputs: list[np.ndarray]) -> np.ndarray:
    window = record.window
    images = dequantized_float32(inputs[0], record.input_log2scale)
    count, channels = len(images), record.input_channel_num
    padded = np.zeros((count, window.padded_height, window.padded_width, channels), np.float32)
    padded[:, window.pad_top:window.pad_top + window.height, window.pad_left:window.pad_left + window.width] = images
    weight = np.asarray(params["weight"], np.float32)
    out_channels = record.output_channel_num
    acc = np.zeros((count, window.out_height, window.out_width, out_channels), np.float32)
    if record.load_bias:
        acc += np.asarray(params["bias"], np.float32)  # 0 + b = b exactly
    (kernel_h, kernel_w), (stride_h, stride_w), (dilation_h, dilation_w) = window.kernel, window.stride, window.dilation
    for kh in range(kernel_h):
        for kw in range(kernel_w):
            rows = slice(kh * dilation_h, kh * dilation_h + (window.out_height - 1) * stride_h + 1, stride_h)
            columns = slice(kw * dilation_w, kw * dilation_w + (window.out_width - 1) * stride_w + 1, stride_w)
            taps = padded[:, rows, columns, :]
            if record.depthwise:
                acc += taps * weight[kh, kw]
            else:
                for ci in range(channels):
                    acc += taps[..., ci:ci + 1] * weight[kh, kw, ci]
    low, high = record.clamp()
    return np.clip(quantize(acc, record.output_log2scale), max(low, INT8_MIN), min(high, INT8_MAX)).astype(np.int8)

