"""batch_matmul, of both dialects, as C99 (the contract: core/backends/c/emitter.py): per output element the int64 sum
of its row and column (less the zero points on the tflite_int8 dialect), then the dialect's requantization
(core/ir/ops/batch_matmul/kernel.py: requantization_model) rendered as one expression."""

from __future__ import annotations

from core.backends.c.emitter import c_function, emits
from core.backends.c.integer_model import affine_expression
from core.backends.c.ops.transpose import nested_loops, row_major_strides
from core.ir.ops.batch_matmul.kernel import requantization_model
from core.ir.ops.batch_matmul.record import BatchMatMulLayer


def _operand_strides(record: BatchMatMulLayer, position: int) -> tuple[list[int], int]:
    """(the operand's stride along each output axis, its stride along k): 0 along a batch axis it is broadcast over and
    along the output axis it does not span (the first operand is read along rows, the second along columns)."""
    shape = tuple(record.shape_of_input(position))
    strides = row_major_strides(shape)
    batch_rank = len(record.output_shape) - 2
    padded_shape, padded_strides = (1,) * (batch_rank + 2 - len(shape)) + shape, [0] * (batch_rank + 2 - len(shape)) + strides
    batch = [0 if padded_shape[axis] == 1 else padded_strides[axis] for axis in range(batch_rank)]
    inner, outer = padded_strides[-1], padded_strides[-2]  # along the last axis, along the one before
    transposed = (record.adj_x, record.adj_y)[position]
    if position == 0:  # rows: its axis -2 (-1 transposed); k: its axis -1 (-2)
        along, depth = (inner, outer) if transposed else (outer, inner)
        return [*batch, along, 0], depth
    along, depth = (outer, inner) if transposed else (inner, outer)  # columns: its axis -1 (-2); k: its axis -2 (-1)
    return [*batch, 0, along], depth


@emits("batch_matmul")
def batch_matmul_emit_c(record: BatchMatMulLayer, symbol: str) -> str:
    (first, first_k), (second, second_k) = _operand_strides(record, 0), _operand_strides(record, 1)
    zero_points = (0, 0) if record.on_pow2_grids else tuple(grid.zero_point for grid in record.input_grids)
    body = ("{{ const int8_t *x = in0 + {0}, *y = in1 + {1}; int64_t sum = 0; long k; "
            f"for (k = 0; k < {record.depth}; k++) sum += (int64_t)(x[k * {first_k}] - ({zero_points[0]})) * "
            f"(y[k * {second_k}] - ({zero_points[1]})); "
            f"out[{{2}}] = {affine_expression(requantization_model, record, ['sum'])}; }}}}")
    loops = nested_loops(tuple(record.output_shape), [first, second, row_major_strides(tuple(record.output_shape))], body)
    return (f"/* batch_matmul {[list(shape) for shape in record.input_shapes]} (adj {int(record.adj_x)}{int(record.adj_y)}) -> "
            f"{list(record.output_shape)} ({record.dialect}) */\n{c_function(record, symbol, 2)}{loops}\n}}\n")
