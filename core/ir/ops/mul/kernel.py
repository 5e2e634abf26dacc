"""The mul layer's integer arithmetic, defined once: its integer model, which the annotated graph computes as graph ops
and the simulator as its kernel (core/ir/integer_kernel.py)."""

from __future__ import annotations

from core.frontend.layers import IntegerModelBuilder
from core.ir.activations import activation_named


def mul_model(model: IntegerModelBuilder):
    """int8 x int8 -> int8: the product (|p| <= 2^14) of the broadcast inputs, shifted by output_shift (right with
    round-half-up, or left), the activation's clamp, saturated. One rounding: bit-identical to TF's float Mul followed
    by FakeQuant."""
    ints = [model.to_ints(tensor, scale) for tensor, scale in zip(model.inputs, model.input_log2scales)]
    shift = sum(model.input_log2scales) - model.output_log2scale
    product = model.round_shift(model.op("Mul", ints), shift)
    low, high = activation_named(model.activation).clamp(model.output_log2scale)
    return model.from_ints(model.clamp(product, low, high), model.output_log2scale)
