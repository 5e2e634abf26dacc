"""The bilinear resize on the tflite_int8 scheme as TFLite's reference kernel computes it for int8 (input and
output share their scale and zero point; the nearest one is record.py's, one for both dialects): bilinear
(reference_ops::ResizeBilinearInteger) works in 10-bit fixed point: scale_10 = round(2^10 x in / out),
each output a weighted sum of four inputs in 2^-20 units rounded half away from zero."""

from __future__ import annotations

import numpy as np

from core.quantize.tflite_math import round_half_away


def _scale_10(output_size: int, input_size: int, align_corners: bool) -> int:
    if align_corners and output_size > 1:
        return ((1 << 10) * (input_size - 1) + (output_size - 1) // 2) // (output_size - 1)
    return ((1 << 10) * input_size + output_size // 2) // output_size


def interpolation(output_size: int, input_size: int, align_corners: bool, half_pixel_centers: bool):
    """(position in 2^-10 units, lower index, upper index) per output index (ComputeInterpolationValuesInteger)."""
    scale = _scale_10(output_size, input_size, align_corners)
    index = np.arange(output_size, dtype=np.int64)
    position = index * scale + scale // 2 - (1 << 9) if half_pixel_centers else index * scale
    truncated = np.where(position >= 0, position >> 10, -((-position) >> 10))  # C's division truncates
    upper_sum = position + (1 << 10) - 1
    upper = np.where(upper_sum >= 0, upper_sum >> 10, -((-upper_sum) >> 10))
    return position, np.maximum(truncated, 0), np.minimum(upper, input_size - 1)


def resize_bilinear_affine(inputs: np.ndarray, size: tuple[int, int], align_corners: bool, half_pixel_centers: bool) -> np.ndarray:
    y, y0, y1 = interpolation(size[0], inputs.shape[1], align_corners, half_pixel_centers)
    x, x0, x1 = interpolation(size[1], inputs.shape[2], align_corners, half_pixel_centers)
    dy, dx = (y - (y0 << 10))[:, None, None], (x - (x0 << 10))[None, :, None]
    values = inputs.astype(np.int64)

    def at(rows, columns):
        return values[:, rows][:, :, columns]

    total = (at(y0, x0) * ((1 << 10) - dy) * ((1 << 10) - dx) + at(y1, x0) * dy * ((1 << 10) - dx)
             + at(y0, x1) * ((1 << 10) - dy) * dx + at(y1, x1) * dy * dx)
    rounded = total + np.where(total > 0, 1 << 19, -(1 << 19))
    return np.where(rounded >= 0, rounded >> 20, -((-rounded) >> 20)).astype(np.int8)
