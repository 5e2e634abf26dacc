"""The gather layer's kernel."""

from __future__ import annotations

import numpy as np

from core.ir.ops.gather.record import GatherLayer
from core.ir.records import IrError


def gather_kernel(record: GatherLayer, params: dict, inputs: list) -> np.ndarray:
    """int32 ids [N, *input_shape] -> [N, *input_shape, depth]: each id's row of the table; an id outside [0, vocabulary)
    is an error (TFLite's GATHER refuses it)."""
    ids = np.asarray(inputs[0])
    table = np.asarray(params["table"]).reshape(record.vocabulary, record.depth)
    if ids.size and (ids.min() < 0 or ids.max() >= record.vocabulary):
        raise IrError(f"layer {record.name} (gather): ids from {int(ids.min())} to {int(ids.max())}; the table has {record.vocabulary} "
                      "rows")
    return np.ascontiguousarray(table[ids], dtype=record.integer_dtype)
