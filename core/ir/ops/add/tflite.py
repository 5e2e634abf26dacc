"""A .tflite's ADD of two int8 tensors of one shape as an add layer of the tflite_int8 dialect (TF2IR 1.2), its
requantization derived as add.cc's Prepare does (core/ir/common_scale.py)."""

from __future__ import annotations

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.common_scale import LEFT_SHIFTS, common_scale_multipliers
from core.ir.tflite_dialect import activation_bits, clamp_fields, scale_and_zero_point


def add_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    shapes = [tuple(model.tensor(index).shape[1:]) for index in (*operator.inputs, operator.outputs[0])]
    if len(set(shapes)) != 1 or any(model.tensor(index).data is not None for index in operator.inputs):
        raise TfliteError(f"{model.path}: operator {operator.index} (ADD) of shapes {[list(shape) for shape in shapes]}; the tflite_int8 "
                          "IR adds two computed tensors of one shape")
    (first_scale, first_zero), (second_scale, second_zero), (output_scale, output_zero) = (
        scale_and_zero_point(model, index) for index in (*operator.inputs, operator.outputs[0]))
    if model.tensor(operator.outputs[0]).dtype == "INT16" and operator.option("potScaleInt16", True):
        raise TfliteError(f"{model.path}: operator {operator.index} (ADD) with pot_scale_int16: the IR computes the 16x8 ADD of "
                          "general scales (pot_scale_int16 false), as TensorFlow's converter writes it")
    left_shift = LEFT_SHIFTS[activation_bits(model, operator)]
    (first_multiplier, first_shift), (second_multiplier, second_shift), (multiplier, shift) = common_scale_multipliers(
        first_scale, second_scale, output_scale, left_shift)
    return {"shape": [int(v) for v in shapes[0]], "input_scales": [first_scale, second_scale], "input_zero_points": [first_zero, second_zero],
            "input_multipliers": [first_multiplier, second_multiplier], "input_shifts": [first_shift, second_shift],
            "left_shift": left_shift, "output_multiplier": multiplier, "output_shift": shift, "output_scale": output_scale,
            "output_zero_point": output_zero, **clamp_fields(model, operator)}, {}
