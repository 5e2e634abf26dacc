"""The C of an element-wise operation (its IrOp's `elementwise`: each output element a function of its inputs' elements
at that index), rendered from that one definition per element: one loop per output axis, each operand read at its
broadcast offset (stride 0 along an axis it is broadcast over), the element the model's int64 expression
(integer_model.py) saturated to the layer's width. An operation that declares `elementwise` and has no emitter of its
own gets this one (ops/__init__.py)."""

from __future__ import annotations

from typing import Any, Callable

from core.backends.c.emitter import CEmitter, c_function
from core.backends.c.integer_model import record_expression
from core.ir.records import IrLayer, broadcast_strides


def elementwise_c(record: IrLayer, symbol: str, model: Callable[..., Any], operands: list[str]) -> str:
    """The layer's function: `operands` are the arrays its operands are read from (in0, in1, or a constant's
    `<symbol>_constant`), of shapes record.shape_of_input(k)."""
    shape = record.shape_of_output()
    strides = [*(broadcast_strides(record.shape_of_input(position), shape) for position in range(len(operands))),
               broadcast_strides(shape, shape)]
    loops, closing, offsets = [], [], ["0"] * len(strides)  # each operand's, then the output's, at each depth
    for axis, size in enumerate(shape):
        depth = "    " * (axis + 1)
        loops.append(f"{depth}for (i{axis} = 0; i{axis} < {size}L; i{axis}++) {{")
        offsets = [f"{offset} + i{axis} * {stride[axis]}" for offset, stride in zip(offsets, strides)]
        closing.append(f"{depth}}}")
    element = record_expression(model, record, [f"{array}[{offset}]" for array, offset in zip(operands, offsets)])
    computed = len(record.operands())
    return f"""/* {record.operation} {" x ".join(str(list(record.shape_of_input(k))) for k in range(len(operands)))} -> {list(shape)} ({record.dialect}, {record.activation_bits}-bit) */
{c_function(record, symbol, computed)}    long {", ".join(f"i{axis}" for axis in range(len(shape)))};
{chr(10).join(loops)}
{"    " * (len(shape) + 1)}out[{offsets[-1]}] = {element};
{chr(10).join(reversed(closing))}
}}
"""


def elementwise_emitter(model: Callable[..., Any]) -> CEmitter:
    """The emitter of an operation whose operands are all computed (in0, in1, ...)."""
    def emit(record: IrLayer, symbol: str) -> str:
        return elementwise_c(record, symbol, model, [f"in{position}" for position in range(len(record.operands()))])
    return emit
