"""transpose as C99 (the contract: core/backends/c/emitter.py): one loop per output axis, the input read at the
permuted strides."""

from __future__ import annotations

from core.backends.c.emitter import c_function, c_values
from core.backends.c.emitter import emits
from core.backends.c.loops import nested_loops, row_major_strides
from core.ir.ops.transpose.record import TransposeLayer


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
