"""tflite_math's requantization compiled: the same integers in one pass over an accumulator array, per
element exactly the C code's MultiplyByQuantizedMultiplier (double rounding), plus the zero point, clamped.
The numpy functions of tflite_math stay the reference; tests/test_tflite_math.py checks this against them."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def requantize_value(accumulator, multiplier, shift, zero_point, low, high):  # pragma: no cover  (compiled)
    x = np.int64(accumulator)
    if shift > 0:  # the C code's int32 left shift wraps
        x = ((x << shift) + 2**31) % 2**32 - 2**31
    scaled = (x * np.int64(multiplier) + (1 << 30)) >> 31  # SaturatingRoundingDoublingHighMul
    if x == -(2**31) and multiplier == -(2**31):
        scaled = 2**31 - 1
    right = -shift if shift < 0 else 0
    if right > 0:  # RoundingDivideByPOT: to nearest, ties away from zero
        scaled = (scaled + (np.int64(1) << (right - 1)) - (1 if scaled < 0 else 0)) >> right
    return min(max(scaled + zero_point, low), high)


@numba.njit(cache=True, nogil=True)
def _requantize_rows(accumulators, bias, multipliers, shifts, zero_point, low, high, out):  # pragma: no cover  (compiled)
    rows, channels = accumulators.shape
    for row in range(rows):
        for channel in range(channels):
            total = np.int64(np.rint(accumulators[row, channel])) + bias[channel]
            out[row, channel] = requantize_value(total, multipliers[channel], shifts[channel], zero_point, low, high)


def requantize_channels(accumulators: np.ndarray, bias: np.ndarray | None, multipliers, shifts, zero_point: int, low: int,
                        high: int) -> np.ndarray:
    """int8 of (accumulators + bias) per output channel (the last axis): accumulators integers held in float32,
    float64 or int64."""
    channels = accumulators.shape[-1]
    flat = np.ascontiguousarray(accumulators).reshape(-1, channels)
    per_channel = [np.broadcast_to(np.asarray(values, np.int64), (channels,)).copy()
                   for values in (np.zeros(channels, np.int64) if bias is None else bias, multipliers, shifts)]
    out = np.empty(flat.shape, np.int8)
    _requantize_rows(flat, *per_channel, np.int64(zero_point), np.int64(low), np.int64(high), out)
    return out.reshape(accumulators.shape)
