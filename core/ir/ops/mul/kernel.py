"""The mul layer's integer arithmetic. TF2IR's, defined once: its integer model, which the annotated graph computes as
graph ops and the simulator as its kernel (core/ir/integer_kernel.py). The tflite_int8 dialect's: TFLite's (affine.py).
The record's grids say which (KERNELS)."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import IntegerModelBuilder
from core.ir.activations import activation_named
from core.ir.integer_kernel import integer_model_kernel
from core.ir.ops.mul.affine import mul_affine
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


def _tflite_mul(record: MulLayer, params: dict, inputs: list) -> np.ndarray:
    factors = [*inputs, params["constant"][np.newaxis]] if record.load_constant else inputs
    return mul_affine(*factors, tuple(grid.zero_point for grid in record.input_grids), (record.multiplier, record.shift),
                      record.output_grid.zero_point, (record.output_min, record.output_max))


KERNELS = {Pow2Grid: integer_model_kernel(mul_model), AffineGrid: _tflite_mul}  # by the output's grid


def mul_kernel(record: MulLayer, params: dict, inputs: list) -> np.ndarray:
    return KERNELS[type(record.output_grid)](record, params, inputs)
