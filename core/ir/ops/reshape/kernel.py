"""The reshape layer's kernel."""

from __future__ import annotations

import numpy as np

from core.ir.ops.reshape.record import ReshapeLayer


def reshape_kernel(record: ReshapeLayer, params: dict, inputs: list) -> np.ndarray:
    """[N, *input_shape] int8 -> [N, *output_shape] int8: each image's data re-read in C (row-major)
    order, i.e. the HWC bytes are unchanged, as TF's Reshape on NHWC. No arithmetic, no rounding."""
    x = np.asarray(inputs[0])
    if list(x.shape[1:]) != list(record.input_shape):
        raise ValueError(f"input of shape {x.shape}; the layer takes [N, *{list(record.input_shape)}]")
    return x.astype(record.integer_dtype, copy=False).reshape((x.shape[0], *record.output_shape))
