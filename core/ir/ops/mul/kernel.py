"""The mul layer's integer kernel."""

from __future__ import annotations

import numpy as np

from core.ir.fixedpoint import round_shift, saturate
from core.ir.ops.mul.record import MulLayer


def mul_kernel(record: MulLayer, params: dict, inputs: list) -> np.ndarray:
    """int8 x int8 -> int8: the product (|p| <= 2^14) of the broadcast inputs, shifted by
    output_shift (right with round-half-up, or left), the activation's clamp, saturated.
    One rounding: bit-identical to TF's float Mul followed by FakeQuant."""
    operands = []
    for position, x in enumerate(inputs):
        x = np.asarray(x, dtype=np.int64)
        if tuple(x.shape[1:]) != record.shape_of_input(position):
            raise ValueError(f"input{position} of shape {x.shape}; the layer takes [N, *{list(record.shape_of_input(position))}]")
        operands.append(record.broadcast(position, x))
    result = round_shift(operands[0] * operands[1], record.output_shift)
    return saturate(np.clip(result, *record.clamp()))
