"""The integer kernels of avg_pool and max_pool."""

from __future__ import annotations

import numpy as np

from core.ir.fixedpoint import round_shift
from core.ir.window_views import windows
from core.ir.ops.pool.affine import mean_requantization
from core.ir.ops.pool.record import AvgPoolLayer, MaxPoolLayer, PoolLayer, RescaledMean, WindowMean
from core.quantize.tflite_math import multiply_by_quantized_multiplier


def _windows(record: PoolLayer, x: np.ndarray, fill: int):
    """Per kernel offset (i, j), the [N, oh, ow, C] view of the element at that offset of every
    window of x padded with `fill`: a loop over the kernel's offsets, vectorized over the rest."""
    pad = record.padding
    padded = np.pad(x, ((0, 0), (pad.top, pad.bottom), (pad.left, pad.right), (0, 0)), constant_values=fill)
    (kh, kw), (sh, sw), (oh, ow) = record.kernel_size.pair(), record.stride.pair(), record.output_size.pair()
    for i in range(kh):
        for j in range(kw):
            yield padded[:, i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw, :]


def _check_input(record: PoolLayer, x: np.ndarray) -> None:
    expected = list(record.shape_of_input(0))
    if x.ndim != 4 or list(x.shape[1:]) != expected:
        raise ValueError(f"input of shape {x.shape}; the layer takes [N, {expected[0]}, {expected[1]}, {expected[2]}]")


def avg_pool_kernel(record: AvgPoolLayer, params: dict, inputs: list) -> np.ndarray:
    """int8 NHWC -> int8 NHWC average pool (int16 -> int16 in TFLite's 16x8 mode).

    1. sum = the sum of the window's elements inside the input (padding contributes nothing); n = their number
       (padding excluded from the count, as TF's AvgPool with SAME padding and TFLite's AveragePool do).
    2. The mean, as the record's `averaging` says (mean_of).
    3. Clamped to [output_min, output_max] (TF2IR's: saturation to [-128, 127]).
    On TF2IR, bit-identical to TF's float AvgPool followed by FakeQuant's round-half-up; on the tflite_int8
    dialect, to TFLite's reference AveragePool and MEAN."""
    x = np.asarray(inputs[0], dtype=np.int64)
    _check_input(record, x)
    total = sum(_windows(record, x, 0))
    count = sum(_windows(record, np.ones((1,) + x.shape[1:3] + (1,), dtype=np.int64), 0))
    if (count == 0).any():
        raise ValueError("a window holds no input element (padding >= kernel)")
    return np.clip(mean_of(record.averaging, total, count), record.output_min, record.output_max).astype(record.integer_dtype)


def mean_of(averaging: WindowMean | RescaledMean, total: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The mean of window sums `total` over `count` elements:
    - WindowMean "half_up" (TF2IR): floor((2 * (sum << pre_shift) + n) / (2 * n)), the round-half-up of the exact
      mean * 2^input_pre_ls at the output scale (towards +inf: -2.5 -> -2);
    - WindowMean "half_away" (TFLite's AVERAGE_POOL_2D): (sum +- n / 2) / n, C's division truncating;
    - RescaledMean (TFLite's MEAN): the sum less zero point x n, rescaled with 1 / n folded into the multiplier,
      plus the output zero point."""
    if isinstance(averaging, RescaledMean):
        multiplier, shift = mean_requantization(int(count.max()), averaging.multiplier, averaging.shift)
        return multiply_by_quantized_multiplier(total - averaging.input_zero_point * count, multiplier, shift) + averaging.output_zero_point
    total = total << averaging.pre_shift
    if averaging.rounding == "half_up":
        return (2 * total + count) // (2 * count)
    numerator = np.where(total > 0, total + count // 2, total - count // 2)
    return np.sign(numerator) * (np.abs(numerator) // count)


def max_pool_kernel(record: MaxPoolLayer, params: dict, inputs: list) -> np.ndarray:
    """int8 NHWC -> int8 NHWC max pool (int16 -> int16 in TFLite's 16x8 mode).

    1. The max over the window's input elements; padding is never chosen (TF pads MaxPool
       with -inf).
    2. Moved to the output scale: shift right by input_log2scale - output_log2scale with
       round-half-up if positive, left if negative (normally 0).
    3. Clamped to [output_min, output_max] (TF2IR's: saturated to [-128, 127]; TFLite's: the fused activation).
    Bit-identical to TF's float MaxPool followed by FakeQuant, and to TFLite's reference MaxPool."""
    x = np.asarray(inputs[0])
    _check_input(record, x)
    (out_height, out_width), int16_min = record.output_size.pair(), np.iinfo(np.int16).min
    patches = windows(x.astype(np.int16), record.kernel_size.pair(), record.stride.pair(), (1, 1), record.padding.as_tuple(), int16_min)
    best = patches[:, :out_height, :out_width].max(axis=(4, 5))
    moved = round_shift(best, record.rescale) if record.rescale else best
    return np.clip(moved, record.output_min, record.output_max).astype(record.integer_dtype)
