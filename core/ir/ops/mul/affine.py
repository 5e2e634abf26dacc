"""mul on the tflite_int8 scheme as TFLite's reference kernel computes it (reference_integer_ops::Mul,
broadcasting as numpy does): (q1 - z1) x (q2 - z2) rescaled by s1 x s2 / s_out (in double from the
float32 scales), plus the output zero point, clamped to the fused activation's range."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from core.ir.ops.add.affine import byte_indexed, pair_lookup
from core.quantize.tflite_math import quantize_multiplier, requantize


def mul_requantization(first_scale: float, second_scale: float, output_scale: float) -> tuple[int, int]:
    return quantize_multiplier(float(np.float32(first_scale)) * float(np.float32(second_scale)) / float(np.float32(output_scale)))


def mul_affine(first: np.ndarray, second: np.ndarray, zero_points: tuple[int, int], requantization: tuple[int, int],
               output_zero_point: int, activation_range: tuple[int, int]) -> np.ndarray:
    """int8 x int8 -> int8, broadcasting, as a lookup in the 256 x 256 table of every pair's product (the
    arithmetic once per pair, not per element)."""
    table = _mul_pairs(tuple(zero_points), tuple(requantization), output_zero_point, tuple(activation_range))
    return pair_lookup(table, np.ascontiguousarray(first), np.ascontiguousarray(second))


@lru_cache(maxsize=256)
def _mul_pairs(zero_points: tuple[int, int], requantization: tuple[int, int], output_zero_point: int,
               activation_range: tuple[int, int]) -> np.ndarray:
    values = np.arange(-128, 128, dtype=np.int64)
    products = (values[:, None] - zero_points[0]) * (values[None, :] - zero_points[1])
    return byte_indexed(requantize(products, *requantization, output_zero_point, *activation_range))
