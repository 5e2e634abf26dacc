"""The lut layer's kernel."""

from __future__ import annotations

import numpy as np

from core.ir.ops.lut.record import TABLE_SIZE, LutLayer


def lut_kernel(record: LutLayer, params: dict, inputs: list) -> np.ndarray:
    """int8 -> int8, y = table[x + 128] element by element: no arithmetic, no rounding of its own
    (the table holds the rounded function)."""
    x = np.asarray(inputs[0])
    table = np.asarray(params["table"], np.int8)
    if table.shape != (TABLE_SIZE,):
        raise ValueError(f"layer {record.name}: a table of shape {list(table.shape)}; expected [{TABLE_SIZE}]")
    if list(x.shape[1:]) != list(record.shape):
        raise ValueError(f"input of shape {x.shape}; the layer takes [N, *{list(record.shape)}]")
    return table[x.astype(np.int64) + TABLE_SIZE // 2]
