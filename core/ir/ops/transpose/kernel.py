"""The transpose layer's kernel."""

from __future__ import annotations

import numpy as np

from core.ir.ops.transpose.record import TransposeLayer


def transpose_kernel(record: TransposeLayer, params: dict, inputs: list) -> np.ndarray:
    """[N, *input_shape] -> [N, *output_shape]: each image's axes permuted (the batch axis first); no arithmetic."""
    x = np.asarray(inputs[0])
    if list(x.shape[1:]) != list(record.input_shape):
        raise ValueError(f"input of shape {x.shape}; the layer takes [N, *{list(record.input_shape)}]")
    return np.ascontiguousarray(x.transpose(0, *(axis + 1 for axis in record.permutation)), dtype=record.integer_dtype)
