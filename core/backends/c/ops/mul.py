"""mul as C99 (the contract: core/backends/c/emitter.py)."""

from __future__ import annotations

from core.backends.c.emitter import emits
from core.backends.c.integer_model import element_expression
from core.ir.ops.mul.kernel import mul_model
from core.ir.ops.mul.record import MulLayer


@emits("mul")
def mul_emit_c(record: MulLayer, symbol: str) -> str:
    """`mul_model` (core/ir/ops/mul/kernel.py) for one image, rendered per element: one loop per output axis, each input
    advancing by its broadcast stride (0 along an axis it is broadcast over)."""
    shape = record.shape_of_output()
    strides = [record.strides(0), record.strides(1)]
    loops, closing = [], []
    indent = "    "
    offsets = ["0", "0", "0"]  # input0, input1, output offsets at the current depth
    out_strides = []
    step = 1
    for size in reversed(shape):
        out_strides.append(step)
        step *= size
    out_strides.reverse()
    for axis, size in enumerate(shape):
        depth = indent * (axis + 1)
        loops.append(f"{depth}for (i{axis} = 0; i{axis} < {size}; i{axis}++) {{")
        offsets = [f"{offsets[k]} + i{axis} * {stride}" for k, stride in enumerate((strides[0][axis], strides[1][axis], out_strides[axis]))]
        closing.append(f"{depth}}}")
    body = indent * (len(shape) + 1)
    declarations = ", ".join(f"i{axis}" for axis in range(len(shape)))
    return f"""/* mul {list(record.input0_shape)} x {list(record.input1_shape)} -> {list(shape)}, >> {record.output_shift}; {record.activation_type} */
static void {symbol}(const int8_t *restrict in0, const int8_t *restrict in1, int8_t *restrict out)
{{
    int {declarations};
{chr(10).join(loops)}
{body}out[{offsets[2]}] = {element_expression(mul_model, record, [f"in0[{offsets[0]}]", f"in1[{offsets[1]}]"])};
{chr(10).join(reversed(closing))}
}}
"""
