"""The integer kernels of avg_pool and max_pool."""

from __future__ import annotations

import functools

import numpy as np

from core.ir.fixedpoint import round_shift, saturate
from core.ir.ops.pool.record import AvgPoolLayer, MaxPoolLayer, PoolLayer


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
    """int8 NHWC -> int8 NHWC average pool.

    1. Each input element is shifted left by input_pre_ls (>= 0; exact).
    2. sum = the int32 sum of the shifted elements inside the window; padding contributes nothing.
    3. n = the number of window elements inside the input (padding excluded from the count, as
       TF's AvgPool with SAME padding does; with VALID padding n = kernel height * width).
    4. out = floor((2 * sum + n) / (2 * n)): sum / n rounded half up (towards +inf; -2.5 -> -2),
       which is the round-half-up of the exact mean * 2^input_pre_ls at the output scale.
    5. Saturate to [-128, 127].
    Bit-identical to TF's float AvgPool followed by FakeQuant's round-half-up."""
    x = np.asarray(inputs[0], dtype=np.int64)
    _check_input(record, x)
    x = x << int(record.input_pre_ls)
    total = sum(_windows(record, x, 0))
    count = sum(_windows(record, np.ones((1,) + x.shape[1:3] + (1,), dtype=np.int64), 0))
    if (count == 0).any():
        raise ValueError("a window holds no input element (padding >= kernel)")
    return saturate((2 * total + count) // (2 * count))


def max_pool_kernel(record: MaxPoolLayer, params: dict, inputs: list) -> np.ndarray:
    """int8 NHWC -> int8 NHWC max pool.

    1. The max over the window's input elements; padding is never chosen (TF pads MaxPool
       with -inf).
    2. Moved to the output scale: shift right by input_log2scale - output_log2scale with
       round-half-up if positive, left if negative (normally 0).
    3. Saturate to [-128, 127]. Bit-identical to TF's float MaxPool followed by FakeQuant."""
    x = np.asarray(inputs[0], dtype=np.int64)
    _check_input(record, x)
    best = functools.reduce(np.maximum, _windows(record, x, np.iinfo(np.int64).min))
    return saturate(round_shift(best, record.rescale))
