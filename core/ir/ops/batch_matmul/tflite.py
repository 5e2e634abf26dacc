"""A .tflite's BATCH_MATMUL of two int8 activations as a batch_matmul layer of the tflite_int8 dialect, its
requantization derived as batch_matmul.cc's Prepare does (the scales' product and quotient in double)."""

from __future__ import annotations

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.ir.tflite_dialect import clamp_fields, product_requantization, scale_and_zero_point
from core.quantize.runtimes import Runtime


def batch_matmul_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    if any(model.tensor(index).data is not None for index in operator.inputs[:2]):
        raise TfliteError(f"{model.path}: operator {operator.index} (BATCH_MATMUL) by a constant; the IR's batch_matmul multiplies two "
                          "activations (a product by constant weights is a FULLY_CONNECTED)")
    (first_scale, first_zero), (second_scale, second_zero), (output_scale, output_zero) = (
        scale_and_zero_point(model, index) for index in (*operator.inputs[:2], operator.outputs[0]))
    multiplier, shift = product_requantization(first_scale, second_scale, output_scale, "double")
    return {"input_shapes": [[int(v) for v in model.tensor(index).shape[1:]] for index in operator.inputs[:2]],
            "output_shape": [int(v) for v in model.tensor(operator.outputs[0]).shape[1:]],
            "adj_x": bool(operator.option("adjX", False)), "adj_y": bool(operator.option("adjY", False)),
            "input_scales": [first_scale, second_scale], "input_zero_points": [first_zero, second_zero], "multiplier": multiplier,
            "shift": shift, "output_scale": output_scale, "output_zero_point": output_zero, **clamp_fields(model, operator)}, {}
