"""Where TFLite's reference kernel of an int8 bilinear resize samples its input (reference_ops::ResizeBilinearInteger,
ComputeInterpolationValuesInteger), in 10-bit fixed point: scale_10 = round(2^10 x in / out), positions i x scale_10
(less half a pixel with half_pixel_centers). The tflite_int8 dialect's coordinates of resize_bilinear (record.py)."""

from __future__ import annotations

import numpy as np


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
