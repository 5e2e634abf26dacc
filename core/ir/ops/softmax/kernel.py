"""The softmax layer's integer arithmetic. TF2IR's, defined once: its integer model, in int64 (TensorFlow's integer ops
are exact), which the annotated graph computes as graph ops and the simulator as its kernel (core/ir/integer_kernel.py).
The tflite_int8 dialect's: TFLite's fixed point (affine.py). The record's normalization says which (KERNELS)."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import IntegerModelBuilder
from core.ir.integer_kernel import integer_model_kernel
from core.ir.ops.softmax.affine import softmax_affine, softmax_exp_table, softmax_int16
from core.ir.ops.softmax.record import ExpTableDivision, FixedPointSoftmax, SoftmaxLayer, exp_table
from core.ir.records import by_arithmetic


def softmax_model(model: IntegerModelBuilder):
    """int8 -> int8 over the last axis, in integers:

    1. d = max(x) - x, in [0, 255] (max over the last axis);
    2. e = exp_table(input_log2scale, beta)[d]: exp(-d * beta * 2^-input_log2scale) in Q16, e[0] = 2^16;
    3. s = sum(e) over the last axis (an int32: at most MAX_CLASSES values);
    4. y = floor((e * 2^(output_log2scale + 1) + s) / (2 s)) -- e / s at the output scale rounded
       half up -- in 64 bits, saturated to [-128, 127] (integer_model_kernel's saturation; only
       y = 128, p > 127/128 at log2scale 7, saturates).
    The exp of the shifted logits is the float softmax's, to 2^-17 relative; the division and its
    rounding are exact. Arg-max is kept unless two probabilities round to the same integer."""
    x = model.op("Cast", [model.to_ints(model.inputs[0], model.input_log2scales[0])], cast_to="int64")
    last = model.const("last_axis", -1, "int32")
    d = model.op("Sub", [model.op("Max", [x, last], keep_dims=True), x])
    e = model.op("GatherV2", [model.const("exp_table", exp_table(model.input_log2scales[0], model.attrs.beta).astype("int64"), "int64"), d,
                              model.const("axis", 0, "int32")])
    total = model.op("Sum", [e, last], keep_dims=True)
    numerator = model.op("AddV2", [model.op("Mul", [e, model.const("scale", 2 ** (model.output_log2scale + 1), "int64")]), total])
    quotient = model.op("FloorDiv", [numerator, model.op("Mul", [total, model.const("two", 2, "int64")])])
    saturated = model.op("Minimum", [quotient, model.const("int8_max", 127, "int64")])
    return model.from_ints(model.op("Cast", [saturated], cast_to="float32"), model.output_log2scale)


def _tflite_softmax(record: SoftmaxLayer, params: dict, inputs: list) -> np.ndarray:
    normalization = record.normalization
    if normalization.bits == 16:
        return softmax_int16(inputs[0], normalization.input_scale, normalization.beta, normalization.lut_precision)
    return softmax_affine(inputs[0], softmax_exp_table(normalization.input_scale, normalization.beta))


softmax_kernel = by_arithmetic("normalization", {ExpTableDivision: integer_model_kernel(softmax_model), FixedPointSoftmax: _tflite_softmax})
