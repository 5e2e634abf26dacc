"""mul of the tflite_int8 dialect as C99 (the contract: core/backends/c/emitter.py;
the arithmetic: runtime/qt_tflite.h)."""

from __future__ import annotations

import math

from core.backends.c.emitter import emits
from core.ir.ops.mul.affine_record import MulAffineLayer


def _broadcast_strides(shape: tuple[int, ...], output: tuple[int, ...]) -> list[int]:
    """The C-order strides of a factor read at each output index (0 along a broadcast dimension)."""
    shape = (1,) * (len(output) - len(shape)) + tuple(shape)
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(0 if size == 1 else step)
        step *= size
    return strides[::-1]


@emits("mul@tflite_int8")
def mul_affine_emit_c(record: MulAffineLayer, symbol: str) -> str:
    """reference_integer_ops::Mul per output element, each factor read at its broadcast index: (a - z0) x
    (b - z1) rescaled (rounding twice), plus the output zero point, clamped. A constant second factor is
    `<symbol>_constant`."""
    output = tuple(int(v) for v in record.shape)
    strides = [_broadcast_strides(tuple(shape), output) for shape in record.input_shapes]
    output_strides = _broadcast_strides(output, output)
    index = {k: "i" if stride == output_strides else " + ".join(f"(i / {step} % {size}) * {stride[d]}" for d, (step, size) in enumerate(zip(output_strides, output)) if stride[d])
             or "0" for k, stride in enumerate(strides)}
    second = f"{symbol}_constant" if record.load_constant else "in1"
    pointers = "const int8_t *restrict in0" + ("" if record.load_constant else ", const int8_t *restrict in1")
    (first_zero, second_zero) = record.input_zero_points
    return f"""/* mul of {[list(shape) for shape in record.input_shapes]} -> {list(output)} (tflite_int8) */
static void {symbol}({pointers}, int8_t *restrict out)
{{
    long i;
    for (i = 0; i < {math.prod(output)}L; i++) {{
        int64_t product = (int64_t)(in0[{index[0]}] - ({first_zero})) * ({second}[{index[1]}] - ({second_zero}));
        out[i] = (int8_t)qt_clamp64(qt_mbqm(product, INT64_C({record.multiplier}), {record.shift}) + ({record.output_zero_point}),
                                    {record.output_min}, {record.output_max});
    }}
}}
"""
