"""A .tflite's MUL of two int8 (or, in TFLite's 16x8 mode, int16) tensors as a mul layer of the tflite_int8 dialect (TF2IR 1.2), broadcasting as numpy
does (a squeeze-excitation's [H, W, C] x [1, 1, C]), one of them possibly a constant (params/<name>_constant.npy,
always the second factor: the product commutes), its requantization derived as mul.cc's Prepare does (product_requantization)."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.tflite_dialect import clamp_fields, product_requantization, scale_and_zero_point


def mul_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    inputs = sorted(operator.inputs, key=lambda index: model.tensor(index).data is not None)  # a constant second
    constant = model.tensor(inputs[1]).data
    if model.tensor(inputs[0]).data is not None:
        raise TfliteError(f"{model.path}: operator {operator.index} (MUL) of two constants; the converter folds those")
    (first_scale, first_zero), (second_scale, second_zero), (output_scale, output_zero) = (
        scale_and_zero_point(model, index) for index in (*inputs, operator.outputs[0]))
    multiplier, shift = product_requantization(first_scale, second_scale, output_scale, runtime.scale_product_precision)
    output_shape = [int(v) for v in model.tensor(operator.outputs[0]).shape[1:]]
    fields = {"shape": output_shape, "input_shapes": [[int(v) for v in model.tensor(inputs[0]).shape[1:]], per_image(model, inputs[1], output_shape)],
              "input_scales": [first_scale, second_scale], "input_zero_points": [first_zero, second_zero], "multiplier": multiplier,
              "shift": shift, "output_scale": output_scale, "output_zero_point": output_zero, "load_constant": constant is not None,
              **clamp_fields(model, operator)}
    integers = np.int16 if model.tensor(inputs[0]).dtype == "INT16" else np.int8
    return fields, ({} if constant is None else {"constant": np.ascontiguousarray(constant, integers).reshape(fields["input_shapes"][1])})


def per_image(model: TfliteModel, index: int, output_shape: list[int]) -> list[int]:
    """A factor's shape against one image's output: a computed tensor's without its batch, a constant's
    aligned from the right (its leading 1s dropped or added)."""
    shape = [int(v) for v in model.tensor(index).shape]
    if model.tensor(index).data is None:
        return shape[1:]
    while len(shape) > len(output_shape) and shape[0] == 1:
        shape = shape[1:]
    return [1] * (len(output_shape) - len(shape)) + shape
