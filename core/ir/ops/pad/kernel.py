"""The pad layer's kernel."""

from __future__ import annotations

import numpy as np

from core.ir.ops.pad.record import PadLayer


def pad_kernel(record: PadLayer, params: dict, inputs: list) -> np.ndarray:
    """[N, H, W, C] int8 (int16) -> [N, H + top + bottom, W + left + right, C]: the grid's zero around the image
    (TF2IR's 0; TFLite's reference Pad fills an int8 or int16 tensor with its zero point)."""
    padding = record.padding
    return np.pad(np.asarray(inputs[0], record.integer_dtype), ((0, 0), (padding.top, padding.bottom), (padding.left, padding.right), (0, 0)),
                  constant_values=record.grid.zero_point)
