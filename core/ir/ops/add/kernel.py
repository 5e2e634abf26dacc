"""The add layer's integer arithmetic, each dialect's defined once as integer steps: TF2IR's integer model, which the
annotated graph computes as graph ops, the simulator as its kernel (core/ir/integer_kernel.py) and the C per element;
the tflite_int8 dialect's affine model (TFLite's ADD), which the simulator computes as a table of every pair of inputs
and the C per element. The record's grids say which (KERNELS)."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import IntegerModelBuilder
from core.ir.activations import activation_named
from core.ir.integer_kernel import ArrayModelBuilder, integer_model_kernel, pair_lookup, pair_table
from core.ir.ops.add.record import AddLayer
from core.quantize.grid import AffineGrid, Pow2Grid


def add_model(model: IntegerModelBuilder):
    """int8 pl + int8 add -> int8, element-wise:

    1. Align: m = min(pl_log2scale, add_log2scale) (the coarser scale). The operand with the finer
       scale (log2scale s > m) is shifted right by s - m with round-half-up,
       (x + 2^(s-m-1)) >> (s-m); the other is used as is.
    2. Sum (|sum| <= 256).
    3. Shift by output_shift_bit = output_log2scale - m: >= 0 a left shift, < 0 a right shift by
       -output_shift_bit with round-half-up. A left shift saturates, it never wraps: the result is
       the exact sum * 2^output_shift_bit before step 5.
    4. The activation's clamp (Relu6: [0, floor(6 * 2^output_log2scale + 1/2)], the round-half-up
       of 6 at the output scale). Clamping after rounding equals TF's activation before its
       FakeQuant (rounding is monotone).
    5. Saturate to [-128, 127] (the kernel's, integer_model_kernel).

    Against TF's float add + FakeQuant (round-half-up of (pl * 2^-pl_log2scale + add *
    2^-add_log2scale) * 2^output_log2scale): bit-identical with equal input scales (one rounding,
    step 3) and with output_log2scale = m (one rounding, step 1: the other operand is an integer
    at that scale). Otherwise both steps round: within 1 LSB when output_log2scale < m or
    = m + 1 (over all int8 pairs: 12.5-25% of results differ, by +1 mostly, as both roundings
    go half up), and within 2^(output_log2scale - m - 1) LSB when output_log2scale > m + 1
    (step 1's error is magnified by the left shift)."""
    scales, output = model.input_log2scales, model.output_log2scale
    coarse = min(scales)
    aligned = [model.round_shift(model.to_ints(tensor, scale), scale - coarse) for tensor, scale in zip(model.inputs, scales)]
    total = model.round_shift(model.op("AddV2", aligned), coarse - output)
    low, high = activation_named(model.activation).clamp(output)
    return model.from_ints(model.clamp(total, low, high), output)


def tflite_add_model(model: IntegerModelBuilder, record: AddLayer):
    """TFLite's ADD (add.cc's int8 Prepare, reference_integer_ops::Add): each input less its zero point, shifted left by
    left_shift and rescaled by its multiplier and shift (to twice the larger input scale); the sum rescaled by the
    output's, plus the output zero point, clamped to the fused activation's range."""
    scaled = [model.rescale(model.op("Mul", [model.op("Sub", [tensor, model.const("zero_point", grid.zero_point)]),
                                             model.const("left_shift", 1 << record.left_shift)]), multiplier, shift)
              for tensor, grid, multiplier, shift in zip(model.inputs, record.input_grids, record.input_multipliers, record.input_shifts)]
    total = model.rescale(model.op("AddV2", scaled), record.output_multiplier, record.output_shift)
    return model.clamp(model.op("AddV2", [total, model.const("zero_point", record.output_grid.zero_point)]), record.output_min,
                       record.output_max)


def _tflite_add(record: AddLayer, params: dict, inputs: list) -> np.ndarray:
    """int8: the table of every pair; int16 (16x8), whose pairs are too many to tabulate: the model on the arrays."""
    if record.activation_bits == 8:
        return pair_lookup(pair_table(tflite_add_model, record), *inputs)
    return tflite_add_model(ArrayModelBuilder(list(inputs), [], 0, "None"), record).astype(record.output_grid.dtype)


KERNELS = {Pow2Grid: integer_model_kernel(add_model), AffineGrid: _tflite_add}  # by the output's grid


def add_kernel(record: AddLayer, params: dict, inputs: list) -> np.ndarray:
    return KERNELS[type(record.output_grid)](record, params, inputs)
