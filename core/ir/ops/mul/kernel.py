"""The mul layer's integer arithmetic, each dialect's defined once as integer steps: TF2IR's integer model, which the
annotated graph computes as graph ops, the simulator as its kernel (core/ir/integer_kernel.py) and the C per element;
the tflite_int8 dialect's affine model (TFLite's MUL), which the simulator computes as a table of every pair of inputs
and the C per element. The record's grids say which (KERNELS)."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import IntegerModelBuilder
from core.ir.activations import activation_named
from core.ir.integer_kernel import ArrayModelBuilder, integer_model_kernel, pair_lookup, pair_table
from core.ir.ops.mul.record import MulLayer
from core.quantize.grid import AffineGrid, Pow2Grid


def mul_model(model: IntegerModelBuilder):
    """int8 x int8 -> int8: the product (|p| <= 2^14) of the broadcast inputs, shifted by output_shift (right with
    round-half-up, or left), the activation's clamp, saturated. One rounding: bit-identical to TF's float Mul followed
    by FakeQuant."""
    ints = [model.to_ints(tensor, scale) for tensor, scale in zip(model.inputs, model.input_log2scales)]
    shift = sum(model.input_log2scales) - model.output_log2scale
    product = model.round_shift(model.op("Mul", ints), shift)
    low, high = activation_named(model.activation).clamp(model.output_log2scale)
    return model.from_ints(model.clamp(product, low, high), model.output_log2scale)


def tflite_mul_model(model: IntegerModelBuilder, record: MulLayer):
    """TFLite's MUL (reference_integer_ops::Mul): (q0 - z0) x (q1 - z1) rescaled by the multiplier and shift (input
    scale 0 x input scale 1 / output scale), plus the output zero point, clamped to the fused activation's range."""
    first, second = (model.op("Sub", [tensor, model.const("zero_point", grid.zero_point)]) for tensor, grid in zip(model.inputs, record.input_grids))
    product = model.rescale(model.op("Mul", [first, second]), record.multiplier, record.shift)
    return model.clamp(model.op("AddV2", [product, model.const("zero_point", record.output_grid.zero_point)]), record.output_min,
                       record.output_max)


def _tflite_mul(record: MulLayer, params: dict, inputs: list) -> np.ndarray:
    """Broadcasting as numpy does; a constant second factor is the layer's `constant`. int8: the table of every pair;
    int16 (16x8), whose pairs are too many to tabulate: the model on the arrays."""
    factors = [*inputs, params["constant"][np.newaxis]] if record.load_constant else inputs
    if record.activation_bits == 8:
        return pair_lookup(pair_table(tflite_mul_model, record), *factors)
    return tflite_mul_model(ArrayModelBuilder(list(factors), [], 0, "None"), record).astype(record.output_grid.dtype)


KERNELS = {Pow2Grid: integer_model_kernel(mul_model), AffineGrid: _tflite_mul}  # by the output's grid


def mul_kernel(record: MulLayer, params: dict, inputs: list) -> np.ndarray:
    return KERNELS[type(record.output_grid)](record, params, inputs)
