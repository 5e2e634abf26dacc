"""average and max pooling on the tflite_int8 scheme (input and output share scale and zero point),
as TFLite's reference kernels compute them (reference_integer_ops::AveragePool, MaxPool): over the
window's elements inside the image only; the mean's int32 sum divided by their count rounding half
away from zero (C's truncating division of sum +- count / 2); the fused activation's clamp."""

from __future__ import annotations

import numpy as np

from core.ir.ops.conv.affine import windows
from core.quantize.tflite_math import multiply_by_quantized_multiplier


def average_pool_affine(inputs: np.ndarray, kernel, stride, pads, activation_range: tuple[int, int]) -> np.ndarray:
    patches = windows(inputs.astype(np.float64), kernel, stride, (1, 1), pads, 0.0)
    inside = windows(np.ones((1, *inputs.shape[1:3], 1)), kernel, stride, (1, 1), pads, 0.0)
    total = np.rint(patches.sum(axis=(4, 5))).astype(np.int64)
    count = np.rint(inside.sum(axis=(4, 5))).astype(np.int64)
    half = count // 2
    numerator = np.where(total > 0, total + half, total - half)
    mean = np.sign(numerator) * (np.abs(numerator) // count)  # C division: toward zero
    return np.clip(mean, *activation_range).astype(np.int8)


def max_pool_affine(inputs: np.ndarray, kernel, stride, pads, activation_range: tuple[int, int]) -> np.ndarray:
    patches = windows(inputs.astype(np.int16), kernel, stride, (1, 1), pads, np.iinfo(np.int16).min)
    return np.clip(patches.max(axis=(4, 5)), *activation_range).astype(np.int8)


def mean_affine(inputs: np.ndarray, axes: tuple[int, ...], keep_dims: bool, input_zero_point: int, multiplier: int, shift: int,
                output_zero_point: int) -> np.ndarray:
    """MEAN as reference_ops::QuantizedMeanOrSum: the int32 sum over `axes` less zero point x count,
    rescaled by the input-to-output multiplier with 1 / count folded in: the multiplier shifted left by
    floor(log2(count)) (at most 32, and at most 31 + shift) and divided by count in 64 bits."""
    count = int(np.prod([inputs.shape[axis] for axis in axes]))
    total = inputs.astype(np.int64).sum(axis=axes, keepdims=keep_dims) - input_zero_point * count
    folded, folded_shift = mean_requantization(count, multiplier, shift)
    scaled = multiply_by_quantized_multiplier(total, folded, folded_shift) + output_zero_point
    return np.clip(scaled, -128, 127).astype(np.int8)


def mean_requantization(count: int, multiplier: int, shift: int) -> tuple[int, int]:
    """(multiplier, shift) of MEAN with 1 / count folded in: the multiplier shifted left by
    h = min(floor(log2(count)), 32, 31 + shift) and divided by count (both non-negative: C's division),
    the shift less h."""
    headroom = min(count.bit_length() - 1, 32, 31 + shift)
    return (int(multiplier) << headroom) // count, shift - headroom
