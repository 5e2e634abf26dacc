"""mul, of both dialects, as C99 (the contract: core/backends/c/emitter.py): the record's arithmetic
(core/ir/ops/mul/kernel.py: mul_arithmetic with its requantization) rendered per output element in int64, one loop per
output axis, each factor advancing by its broadcast stride (0 along an axis it is broadcast over). A constant second
factor is `<symbol>_constant`."""

from __future__ import annotations

from core.backends.c.emitter import c_function, emits
from core.backends.c.integer_model import record_expression
from core.ir.ops.mul.kernel import record_mul
from core.ir.ops.mul.record import MulLayer, broadcast_strides


@emits("mul")
def mul_emit_c(record: MulLayer, symbol: str) -> str:
    shape = record.shape_of_output()
    strides = [record.strides(0), record.strides(1), broadcast_strides(shape, shape)]
    loops, closing, offsets = [], [], ["0", "0", "0"]  # the first factor's, the second's and the output's at each depth
    for axis, size in enumerate(shape):
        depth = "    " * (axis + 1)
        loops.append(f"{depth}for (i{axis} = 0; i{axis} < {size}L; i{axis}++) {{")
        offsets = [f"{offsets[k]} + i{axis} * {strides[k][axis]}" for k in range(3)]
        closing.append(f"{depth}}}")
    second = f"{symbol}_constant" if record.load_constant else "in1"
    element = record_expression(record_mul, record, [f"in0[{offsets[0]}]", f"{second}[{offsets[1]}]"])
    return f"""/* mul {list(record.shape_of_input(0))} x {list(record.shape_of_input(1))} -> {list(shape)} ({record.dialect}, {record.activation_bits}-bit) */
{c_function(record, symbol, 1 if record.load_constant else 2)}    long {", ".join(f"i{axis}" for axis in range(len(shape)))};
{chr(10).join(loops)}
{"    " * (len(shape) + 1)}out[{offsets[2]}] = {element};
{chr(10).join(reversed(closing))}
}}
"""
