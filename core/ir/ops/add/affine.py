"""add on the tflite_int8 scheme, as TFLite's reference kernel computes it (add.cc's int8 Prepare,
reference_integer_ops::Add): each input, less its zero point, shifted left 20 bits and rescaled by its
own multiplier to twice the larger input scale, summed, rescaled to the output scale, plus the output
zero point, clamped to the fused activation's range."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from core.quantize.tflite_math import multiply_by_quantized_multiplier, quantize_multiplier, requantize

LEFT_SHIFT = 20  # int8 inputs: headroom for the rescaled values in int32


def add_requantization(first_scale: float, second_scale: float, output_scale: float) -> tuple[tuple[int, int], ...]:
    """(multiplier, shift) of each input and of the output, as add.cc derives them in double from the
    float32 scales: twice the larger input scale (a float32 product), each input's scale over it, and it
    over 2^20 x the output scale (a float32 product)."""
    twice_max = float(np.float32(2) * max(np.float32(first_scale), np.float32(second_scale)))
    output = float(np.float32(1 << LEFT_SHIFT) * np.float32(output_scale))
    return (quantize_multiplier(float(np.float32(first_scale)) / twice_max),
            quantize_multiplier(float(np.float32(second_scale)) / twice_max),
            quantize_multiplier(twice_max / output))


def add_affine(first: np.ndarray, second: np.ndarray, zero_points: tuple[int, int], requantization, output_zero_point: int,
               activation_range: tuple[int, int]) -> np.ndarray:
    """int8 + int8 of one shape -> int8, as a lookup in the 256 x 256 table of every pair's sum (the
    arithmetic once per pair, not per element), indexed by the two bytes as one 16-bit number."""
    table = _add_pairs(tuple(zero_points), tuple(map(tuple, requantization)), output_zero_point, tuple(activation_range))
    return pair_lookup(table, first, second)


BYTE_ORDER = (np.arange(256) + 128) % 256  # table row of each byte: byte u is the int8 value u (u < 128) or u - 256


def byte_indexed(table: np.ndarray) -> np.ndarray:
    """A [256, 256] table of int8 pairs (at value + 128) flattened to be indexed by (byte of a) << 8 | byte of b."""
    return table[BYTE_ORDER][:, BYTE_ORDER].ravel()


def pair_lookup(flat_table: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """flat_table (byte_indexed) at every pair of `first` and `second` (broadcasting): one 16-bit index per
    element, no int64 copies of the operands."""
    index = (first.view(np.uint8).astype(np.uint16) << 8) | second.view(np.uint8)
    return np.take(flat_table, index)


@lru_cache(maxsize=256)
def _add_pairs(zero_points: tuple[int, int], requantization, output_zero_point: int, activation_range: tuple[int, int]) -> np.ndarray:
    return byte_indexed(add_table(zero_points, requantization, output_zero_point, activation_range))


def add_table(zero_points: tuple[int, int], requantization, output_zero_point: int, activation_range: tuple[int, int]) -> np.ndarray:
    """[256, 256] int8: the sum of int8 values (a, b) at [a + 128, b + 128]."""
    (first_multiplier, first_shift), (second_multiplier, second_shift), (output_multiplier, output_shift) = requantization
    values = np.arange(-128, 128, dtype=np.int64)
    first, second = (multiply_by_quantized_multiplier((values - zero_point) << LEFT_SHIFT, multiplier, shift)
                     for zero_point, multiplier, shift in ((zero_points[0], first_multiplier, first_shift),
                                                           (zero_points[1], second_multiplier, second_shift)))
    return requantize(first[:, None] + second[None, :], output_multiplier, output_shift, output_zero_point, *activation_range)
