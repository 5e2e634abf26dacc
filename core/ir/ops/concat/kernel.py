"""The concat2 / concat layers' integer kernel."""

from __future__ import annotations

import numpy as np

from core.ir.fixedpoint import round_shift, saturate
from core.ir.ops.concat.record import ConcatOperands


def concat_kernel(record: ConcatOperands, params: dict, inputs: list) -> np.ndarray:
    """int8 inputs (NHWC) -> int8 NHWC (int16 at TFLite's 16x8, all on the output's grid).

    Each input k is moved to output_log2scale on its own: shifted right by
    its log2scale - output_log2scale with round-half-up if positive, left if negative;
    saturated to [-128, 127]; then the inputs are concatenated along dim (H, W or C) in order.
    Every output element comes from one input with one rounding: bit-identical to TF's float
    ConcatV2 followed by FakeQuant, equal scales or not. On the tflite_int8 dialect every input is on the
    output's grid: the integers are joined as they are, as TFLite's CONCATENATION does."""
    parts = []
    for number, x in enumerate(inputs):
        x = np.asarray(x)
        if tuple(x.shape[1:]) != tuple(record.shape_of_input(number)):
            raise ValueError(f"input{number} of shape {x.shape} does not match its fields")
        shift = record.rescale(number)
        parts.append(saturate(round_shift(x, shift)) if shift else x.astype(record.integer_dtype, copy=False))  # on the output's grid
    return np.concatenate(parts, axis=record.image_axis + 1)
