"""The add layer's integer kernel."""

from __future__ import annotations

import numpy as np

from core.ir.fixedpoint import round_shift, saturate
from core.ir.ops.add.record import AddLayer


def add_kernel(record: AddLayer, params: dict, inputs: list) -> np.ndarray:
    """int8 pl + int8 add -> int8, element-wise on NHWC batches.

    1. Align: m = min(pl_log2scale, add_log2scale) (the coarser scale). The operand with the finer
       scale (log2scale s > m) is shifted right by s - m with round-half-up,
       (x + 2^(s-m-1)) >> (s-m); the other is used as is.
    2. Sum in int32 (|sum| <= 256).
    3. Shift by output_shift_bit = output_log2scale - m: >= 0 a left shift, < 0 a right shift by
       -output_shift_bit with round-half-up. A left shift saturates, it never wraps: the result is
       the exact sum * 2^output_shift_bit before step 5.
    4. The activation's clamp (Relu6: [0, floor(6 * 2^output_log2scale + 1/2)], the round-half-up
       of 6 at the output scale). Clamping after rounding equals TF's activation before its
       FakeQuant (rounding is monotone).
    5. Saturate to [-128, 127].

    Against TF's float add + FakeQuant (round-half-up of (pl * 2^-pl_log2scale + add *
    2^-add_log2scale) * 2^output_log2scale): bit-identical with equal input scales (one rounding,
    step 3) and with output_log2scale = m (one rounding, step 1: the other operand is an integer
    at that scale). Otherwise both steps round: within 1 LSB when output_log2scale < m or
    = m + 1 (over all int8 pairs: 12.5-25% of results differ, by +1 mostly, as both roundings
    go half up), and within 2^(output_log2scale - m - 1) LSB when output_log2scale > m + 1
    (step 1's error is magnified by the left shift)."""
    pl, add = (np.asarray(x, dtype=np.int64) for x in inputs)
    expected = list(record.shape_of_input(0))
    for name, x in (("pl", pl), ("add", add)):
        if x.ndim != 4 or list(x.shape[1:]) != expected:
            raise ValueError(f"{name} of shape {x.shape}; the layer takes [N, {expected[0]}, {expected[1]}, {expected[2]}]")
    if pl.shape != add.shape:
        raise ValueError(f"pl {pl.shape} and add {add.shape}: batches of different sizes")
    coarse = record.coarse_log2scale
    total = round_shift(pl, record.pl_log2scale - coarse) + round_shift(add, record.add_log2scale - coarse)
    result = round_shift(total, -int(record.output_shift_bit))
    return saturate(np.clip(result, *record.clamp()))
