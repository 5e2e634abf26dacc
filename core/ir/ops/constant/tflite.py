"""A .tflite's constant operand of an operator whose operation reads it as an activation (ADD, CONCATENATION:
IrOp.constant_operands) as a constant layer of the tflite_int8 dialect: the file's values at the file's quantization."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import TENSOR_TYPES, TfliteModel
from core.ir.tflite_dialect import scale_and_zero_point


def constant_from_tflite(model: TfliteModel, index: int, like: int) -> tuple[dict, dict]:
    """(fields, params) of the constant tensor `index`, copied to the batch of the computed tensor `like`."""
    values, reference = model.tensor(index), model.tensor(like)
    (input_scale, input_zero_point), (output_scale, output_zero_point) = (scale_and_zero_point(model, tensor) for tensor in (like, index))
    shape = [int(v) for v in values.shape[1:]] if len(values.shape) == len(reference.shape) else [int(v) for v in values.shape]
    return ({"input_shape": [int(v) for v in reference.shape[1:]], "output_shape": shape, "input_scale": input_scale,
             "input_zero_point": input_zero_point, "output_scale": output_scale, "output_zero_point": output_zero_point},
            {"values": np.asarray(values.data, TENSOR_TYPES[values.dtype]).reshape(shape)})
