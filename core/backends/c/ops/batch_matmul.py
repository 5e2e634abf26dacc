"""batch_matmul, of both dialects, as C99 (the contract: core/backends/c/emitter.py): per output element the int64 sum
of its row and column (less the zero points on the tflite_int8 dialect), one at a time or a row at a time by the second
operand's layout, then the dialect's requantization (core/ir/ops/batch_matmul/kernel.py: requantization_model) rendered as one expression."""

from __future__ import annotations

from core.backends.c.emitter import c_function, emits
from core.backends.c.integer_model import record_expression
from core.backends.c.loops import nested_loops, row_major_strides
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


def dot_products_c(record: BatchMatMulLayer, symbol: str) -> tuple[str, str]:
    """(no declarations, the loops) of one int64 sum over k per output element, k innermost: where the second operand
    runs along k (adj_y: attention's queries by its keys), its reads in the sum are consecutive."""
    (first, first_k), (second, second_k) = _operand_strides(record, 0), _operand_strides(record, 1)
    zero_points = _zero_points(record)
    body = ("{{ const int8_t *x = in0 + {0}, *y = in1 + {1}; int64_t sum = 0; long k; "
            f"for (k = 0; k < {record.depth}; k++) sum += (int64_t)(x[k * {first_k}] - ({zero_points[0]})) * "
            f"(y[k * {second_k}] - ({zero_points[1]})); "
            f"out[{{2}}] = {record_expression(requantization_model, record, ['sum'])}; }}}}")
    return "", nested_loops(tuple(record.output_shape), [first, second, row_major_strides(tuple(record.output_shape))], body)


def rows_of_sums_c(record: BatchMatMulLayer, symbol: str) -> tuple[str, str]:
    """(a static row of sums, the loops) of a row at a time: each element of the first operand's row times the
    second's row k, added across the columns (innermost, consecutive), then the row requantized. Where the second operand
    runs along the columns (attention's probabilities by its values), the sum per element with k innermost read it
    `columns` apart, and GCC 12.2 at -O2 vectorized that nest over the columns wrongly in a whole program (MiT's
    attention: depth 4, 16 columns)."""
    (first, first_k), (second, second_k) = _operand_strides(record, 0), _operand_strides(record, 1)
    zero_points = _zero_points(record)
    output_strides = row_major_strides(tuple(record.output_shape))
    columns, sums = record.output_shape[-1], f"{symbol}_sums"
    # int32 sums where they cannot overflow (twice the vector lanes of int64): each product's factors within 255
    kind = "int32_t" if record.depth * 255 * 255 <= 2**31 - 1 else "int64_t"
    head = "{{ const int8_t *x = in0 + {0}, *y = in1 + {1}; int8_t *row = out + {2}; long j, k; "  # nested_loops' offsets
    row = (f"for (j = 0; j < {columns}; j++) {sums}[j] = 0; "
           f"for (k = 0; k < {record.depth}; k++) {{ const {kind} xk = x[k * {first_k}] - ({zero_points[0]}); "
           f"const int8_t *yk = y + k * {second_k}; "
           f"for (j = 0; j < {columns}; j++) {sums}[j] += xk * (yk[j * {second[-1]}] - ({zero_points[1]})); }} "
           f"for (j = 0; j < {columns}; j++) row[j * {output_strides[-1]}] = "
           f"{record_expression(requantization_model, record, [f'{sums}[j]'])}; }}")
    loops = nested_loops(tuple(record.output_shape[:-1]), [first[:-1], second[:-1], output_strides[:-1]],
                         head + row.replace("{", "{{").replace("}", "}}"))
    return f"static {kind} {sums}[{columns}];\n", loops


def _zero_points(record: BatchMatMulLayer) -> tuple[int, int]:
    if record.on_pow2_grids:
        return 0, 0
    first, second = record.input_grids
    return first.zero_point, second.zero_point


@emits("batch_matmul")
def batch_matmul_emit_c(record: BatchMatMulLayer, symbol: str) -> str:
    """The loop order by the second operand's layout: the order whose innermost loop reads it consecutively."""
    along_k = _operand_strides(record, 1)[1] == 1
    declarations, loops = (dot_products_c if along_k else rows_of_sums_c)(record, symbol)
    return (f"/* batch_matmul {[list(shape) for shape in record.input_shapes]} (adj {int(record.adj_x)}{int(record.adj_y)}) -> "
            f"{list(record.output_shape)} ({record.dialect}) */\n{declarations}{c_function(record, symbol, 2)}{loops}\n}}\n")
