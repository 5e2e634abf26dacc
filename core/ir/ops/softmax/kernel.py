"""The softmax layer's integer kernel."""

from __future__ import annotations

import numpy as np

from core.ir.fixedpoint import saturate
from core.ir.ops.softmax.record import SoftmaxLayer, exp_table


def softmax_kernel(record: SoftmaxLayer, params: dict, inputs: list) -> np.ndarray:
    """int8 -> int8 over the last axis, in integers:

    1. d = max(x) - x, in [0, 255] (max over the last axis);
    2. e = exp_table(input_log2scale)[d]: exp(-d * 2^-input_log2scale) in Q16, e[0] = 2^16;
    3. s = sum(e) over the last axis (an int32: at most MAX_CLASSES values);
    4. y = floor((e * 2^(output_log2scale + 1) + s) / (2 s)) -- e / s at the output scale rounded
       half up -- in 64 bits, saturated to [-128, 127] (only y = 128, p > 127/128 at log2scale 7,
       saturates).
    The exp of the shifted logits is the float softmax's, to 2^-17 relative; the division and its
    rounding are exact. Arg-max is kept unless two probabilities round to the same integer."""
    x = np.asarray(inputs[0], dtype=np.int64)
    if list(x.shape[1:]) != list(record.shape):
        raise ValueError(f"input of shape {x.shape}; the layer takes [N, *{list(record.shape)}]")
    e = exp_table(record.input_log2scale).astype(np.int64)[x.max(axis=-1, keepdims=True) - x]
    total = e.sum(axis=-1, keepdims=True)
    return saturate((e * 2 ** (record.output_log2scale + 1) + total) // (2 * total))
