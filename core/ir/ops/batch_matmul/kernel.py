"""The batch_matmul layer's integer arithmetic, each dialect's once: the int64 sums of products (`sums`), then TF2IR's
one rounding shift or TFLite's requantization (`requantization_model`), which the C backend renders per output element."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import IntegerModelBuilder
from core.ir.fixedpoint import saturate
from core.ir.integer_kernel import ArrayModelBuilder
from core.ir.ops.batch_matmul.record import BatchMatMulLayer


def _operand(record: BatchMatMulLayer, position: int, batch: np.ndarray) -> np.ndarray:
    shape = tuple(record.shape_of_input(position))
    if tuple(np.shape(batch)[1:]) != shape:
        raise ValueError(f"layer {record.name}: operand {position} of shape {list(np.shape(batch))}; the layer takes [N, "
                         f"{', '.join(map(str, shape))}]")
    values = np.asarray(batch, np.int64)
    if not record.on_pow2_grids:
        values = values - record.input_grids[position].zero_point
    if (record.adj_x, record.adj_y)[position]:
        values = np.swapaxes(values, -1, -2)
    # the batch axes aligned to the output's, as NumPy broadcasts them
    return values.reshape(len(values), *(1,) * (len(record.output_shape) - len(shape)), *values.shape[1:])


def sums(record: BatchMatMulLayer, inputs: list) -> np.ndarray:
    """[N, *output_shape] int64: each output the sum over k of its row of the first operand times its column of the second
    (less the zero points on the tflite_int8 dialect)."""
    return np.matmul(_operand(record, 0, inputs[0]), _operand(record, 1, inputs[1]))


def requantization_model(model: IntegerModelBuilder, record: BatchMatMulLayer):
    """A sum (model.inputs[0]) on the output grid, before saturation: shifted once (TF2IR), or TFLite's
    MultiplyByQuantizedMultiplier, plus the output zero point, clamped. The simulator runs it on arrays, the C backend
    renders it per element."""
    accumulator = model.inputs[0]
    if record.on_pow2_grids:
        return model.round_shift(accumulator, record.output_shift)
    rescaled = model.rescale(accumulator, record.multiplier, record.shift)
    return model.clamp(model.op("AddV2", [rescaled, model.const("zero_point", record.output_grid.zero_point)]), record.output_min,
                       record.output_max)


def batch_matmul_kernel(record: BatchMatMulLayer, params: dict, inputs: list) -> np.ndarray:
    return saturate(requantization_model(ArrayModelBuilder([sums(record, inputs)], [], 0, "None"), record))
