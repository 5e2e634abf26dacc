"""The mul layer's integer arithmetic, defined once for both dialects (`mul_arithmetic`): each factor less its zero
point, the product rescaled to the output scale, plus the output's zero point, clamped. The record's requantization
(record.py: MulRequantization) says with which numbers and which rounding: TF2IR's is the special case of zero points
0 and one power-of-two shift. The annotated graph computes it as graph ops (TF2IR's, `mul_model`), the simulator on
arrays (`mul_kernel`: for int8 a table of every pair) and the C per element, each rendering the same steps."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import IntegerModelBuilder
from core.ir.integer_kernel import ArrayModelBuilder, on_log2scales, pair_lookup, pair_table
from core.ir.ops.mul.record import MulLayer, MulRequantization, shift_requantization
from core.ir.rescale import less_zero_point, onto_output


def mul_arithmetic(model: IntegerModelBuilder, inputs: list, requantization: MulRequantization):
    """The product of two factors' integers (before the saturation to the output's width): (q0 - z0) x (q1 - z1)
    (|p| <= 2^14 for int8 factors), rescaled to the output scale (TF2IR: a shift, right half up or left exact; TFLite's
    reference_integer_ops::Mul: MultiplyByQuantizedMultiplier of input scale 0 x input scale 1 / output scale), plus the
    output zero point, clamped to the fused activation's range. On TF2IR one rounding: bit-identical to TF's float Mul
    followed by FakeQuant."""
    centred = [less_zero_point(model, tensor, zero_point) for tensor, zero_point in zip(inputs, requantization.input_zero_points)]
    product = requantization.rescale.applied(model, model.op("Mul", centred))
    return onto_output(model, product, requantization.output_zero_point, requantization.clamp)


mul_model = on_log2scales(mul_arithmetic, shift_requantization)  # the annotate rule's (TF2IR's tables)


def record_mul(model: IntegerModelBuilder, record: MulLayer):
    """The arithmetic of `record` on the builder's inputs: what the simulator's table and the C render."""
    return mul_arithmetic(model, model.inputs, record.requantization)


def mul_kernel(record: MulLayer, params: dict, inputs: list) -> np.ndarray:
    """Each factor broadcast to [N, *output shape] (a constant second factor is the layer's `constant`, one image's).
    int8: the table of every pair; int16 (16x8), whose pairs are too many to tabulate: the arithmetic on the arrays."""
    batches = [*inputs, params["constant"][np.newaxis]] if record.load_constant else inputs
    factors = [record.broadcast(position, batch) for position, batch in enumerate(batches)]
    if record.activation_bits == 8:
        return pair_lookup(pair_table(record_mul, record), *factors)
    return record_mul(ArrayModelBuilder(factors, [], 0, "None"), record).astype(record.output_grid.dtype)
