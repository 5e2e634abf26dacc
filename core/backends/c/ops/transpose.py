"""transpose as C99 (the contract: core/backends/c/emitter.py): one loop per output axis, the input read at the
permuted strides."""

from __future__ import annotations

from core.backends.c.emitter import c_function, c_values
from core.backends.c.emitter import emits
from core.ir.ops.transpose.record import TransposeLayer


def row_major_strides(shape: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return strides[::-1]


def nested_loops(shape: tuple[int, ...], offsets: list[list[int]], body: str) -> str:
    """C loops over every index of `shape` (i0, i1, ...), `body` innermost with `{k}` replaced by the offset of array k:
    the sum over axes of index times that array's stride along it."""
    lines = [f"{'    ' * (axis + 1)}for (i{axis} = 0; i{axis} < {size}; i{axis}++) {{" for axis, size in enumerate(shape)]
    expressions = [" + ".join(f"i{axis} * {stride}" for axis, stride in enumerate(strides) if stride) or "0" for strides in offsets]
    inner = "    " * (len(shape) + 1) + body.format(*expressions)
    closing = [f"{'    ' * (axis + 1)}}}" for axis in reversed(range(len(shape)))]
    return "\n".join([f"    long {', '.join(f'i{axis}' for axis in range(len(shape)))};", *lines, inner, *closing])


@emits("transpose")
def transpose_emit_c(record: TransposeLayer, symbol: str) -> str:
    """`transpose_kernel`: output index (i0, i1, ...) reads the input where axis permutation[k] is i_k."""
    input_strides = row_major_strides(tuple(record.input_shape))
    read = [0] * len(record.output_shape)
    for output_axis, input_axis in enumerate(record.permutation):
        read[output_axis] = input_strides[input_axis]
    loops = nested_loops(tuple(record.output_shape), [read, row_major_strides(tuple(record.output_shape))], "out[{1}] = in0[{0}];")
    return (f"/* transpose {list(record.input_shape)} by {list(record.permutation)} -> {list(record.output_shape)} ({record.dialect}), "
            f"{c_values(record).type} */\n{c_function(record, symbol, 1)}{loops}\n}}\n")
