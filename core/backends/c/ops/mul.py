"""mul, of both dialects, as C99 (the contract: core/backends/c/emitter.py): its dialect's model (core/ir/ops/mul/kernel.py)
rendered per element, TF2IR's integer model or TFLite's affine model (the rescale: runtime/qt_tflite.h)."""

from __future__ import annotations

import math

from core.backends.c.emitter import c_function, emits
from core.backends.c.integer_model import affine_expression, element_expression
from core.ir.ops.mul.kernel import mul_model, tflite_mul_model
from core.ir.ops.mul.record import MulLayer
from core.quantize.grid import AffineGrid, Pow2Grid


@emits("mul")
def mul_emit_c(record: MulLayer, symbol: str) -> str:
    """The record's product, as its output's grid says (C_MUL)."""
    return C_MUL[type(record.output_grid)](record, symbol)


def _pow2_mul_c(record: MulLayer, symbol: str) -> str:
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


def _broadcast_strides(shape: tuple[int, ...], output: tuple[int, ...]) -> list[int]:
    """The C-order strides of a factor read at each output index (0 along a broadcast dimension)."""
    shape = (1,) * (len(output) - len(shape)) + tuple(shape)
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(0 if size == 1 else step)
        step *= size
    return strides[::-1]


def _tflite_mul_c(record: MulLayer, symbol: str) -> str:
    """`tflite_mul_model` (core/ir/ops/mul/kernel.py) per output element, each factor read at its broadcast index. A
    constant second factor is `<symbol>_constant`."""
    output = tuple(int(v) for v in record.shape)
    strides = [_broadcast_strides(tuple(shape), output) for shape in record.input_shapes]
    output_strides = _broadcast_strides(output, output)
    index = {k: "i" if stride == output_strides else " + ".join(f"(i / {step} % {size}) * {stride[d]}" for d, (step, size) in enumerate(zip(output_strides, output)) if stride[d])
             or "0" for k, stride in enumerate(strides)}
    second = f"{symbol}_constant" if record.load_constant else "in1"
    return f"""/* mul of {[list(shape) for shape in record.input_shapes]} -> {list(output)} (tflite_int8{"" if record.activation_bits == 8 else ", int16"}) */
{c_function(record, symbol, 1 if record.load_constant else 2)}    long i;
    for (i = 0; i < {math.prod(output)}L; i++) {{
        out[i] = {affine_expression(tflite_mul_model, record, [f"in0[{index[0]}]", f"{second}[{index[1]}]"])};
    }}
}}
"""


C_MUL = {Pow2Grid: _pow2_mul_c, AffineGrid: _tflite_mul_c}  # by the output's grid
