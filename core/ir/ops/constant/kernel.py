"""The constant layer's kernel."""

from __future__ import annotations

import numpy as np

from core.ir.ops.constant.record import ConstantLayer


def constant_kernel(record: ConstantLayer, params: dict, inputs: list) -> np.ndarray:
    """[N, *input_shape] -> [N, *output_shape]: the values, once per image."""
    values: np.ndarray = np.asarray(params["values"], record.integer_dtype).reshape(record.output_shape)
    return np.ascontiguousarray(np.broadcast_to(values, (len(inputs[0]), *record.output_shape)))
