"""The lut layer's kernel."""

from __future__ import annotations

import numpy as np

from core.ir.ops.lut.int16 import int16_function
from core.ir.ops.lut.record import TABLE_SIZE, LutLayer


def lut_kernel(record: LutLayer, params: dict, inputs: list) -> np.ndarray:
    """int8 -> int8, y = table[x + 128] element by element: no arithmetic, no rounding of its own (the table holds the
    rounded function); int16 -> int16 (TFLite's 16x8 mode), the function's own arithmetic (int16.py)."""
    x = np.asarray(inputs[0])
    if list(x.shape[1:]) != list(record.shape):
        raise ValueError(f"input of shape {x.shape}; the layer takes [N, *{list(record.shape)}]")
    if record.activation_bits == 16:
        return int16_function(record.function, x, record.input_grid.step, np.asarray(params["table"]), record.fixed_point)
    table = np.asarray(params["table"], np.int8)
    if table.shape != (TABLE_SIZE,):
        raise ValueError(f"layer {record.name}: a table of shape {list(table.shape)}; expected [{TABLE_SIZE}]")
    return table[x.astype(np.int64) + TABLE_SIZE // 2]
