"""The add layer's integer arithmetic, defined once for both dialects (`add_arithmetic`): each input less its zero
point, shifted left for headroom, rescaled to a common scale; the sum rescaled to the output scale, plus the output's
zero point, clamped. The record's requantization (core/ir/common_scale.py: CommonScaleRequantization) says with which numbers and which
rounding: TF2IR's is the special case of zero points 0, no headroom and power-of-two shifts. The annotated graph
computes it as graph ops (TF2IR's, `add_model`), the simulator on arrays (`add_kernel`: for int8 a table of every
pair), the C per element and the accelerator on its ALU, each rendering the same steps."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import IntegerModelBuilder
from core.ir.integer_kernel import ArrayModelBuilder, on_log2scales, pair_lookup, pair_table
from core.ir.common_scale import CommonScaleRequantization, rescaled_operands, shift_requantization
from core.ir.ops.add.record import AddLayer
from core.ir.rescale import onto_output


def add_arithmetic(model: IntegerModelBuilder, inputs: list, requantization: CommonScaleRequantization):
    """The add of two inputs' integers (before the saturation to the output's width):

    1. Each input less its zero point, times 2^left_shift (TFLite's headroom: 20 bits for int8, 15 for int16), rescaled
       by its own step to the common scale: TF2IR's the finer operand shifted right to the coarser's, half up; TFLite's
       MultiplyByQuantizedMultiplier to twice the larger input scale.
    2. The sum, rescaled to the output scale (TF2IR: a shift, left exact, right half up).
    3. Plus the output zero point, clamped to the fused activation's range.

    Against TF's float add + FakeQuant on TF2IR (round-half-up of (pl * 2^-pl_log2scale + add * 2^-add_log2scale) *
    2^output_log2scale): bit-identical with equal input scales (one rounding, step 2) and with the output at the coarser
    scale (one rounding, step 1). Otherwise both steps round: within 1 LSB when the output's log2scale is below the
    coarser one or one above it (12.5-25% of all int8 pairs differ, by +1 mostly), and within 2^(output - coarser - 1)
    LSB beyond (step 1's error magnified by the left shift)."""
    total = requantization.output_rescale.applied(model, model.op("AddV2", rescaled_operands(model, inputs, requantization)))
    return onto_output(model, total, requantization.output_zero_point, requantization.clamp)


add_model = on_log2scales(add_arithmetic, shift_requantization)  # the annotate rule's (TF2IR's tables)


def record_add(model: IntegerModelBuilder, record: AddLayer):
    """The arithmetic of `record` on the builder's inputs: what the simulator's table, the C and the accelerator render."""
    return add_arithmetic(model, model.inputs, record.requantization)


def add_kernel(record: AddLayer, params: dict, inputs: list) -> np.ndarray:
    """int8: the table of every pair (the arithmetic once per pair, not per element); int16 (16x8), whose pairs are too
    many to tabulate: the arithmetic on the arrays."""
    if record.activation_bits == 8:
        return pair_lookup(pair_table(record_add, record), *inputs)
    return record_add(ArrayModelBuilder(list(inputs), [], 0, "None"), record).astype(record.output_grid.dtype)
