"""A .tflite's RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR as resize layers of the tflite_int8 dialect (TF2IR 1.2), input
and output quantized alike (TFLite's int8 resizes keep the input's)."""

from __future__ import annotations

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.tflite_dialect import constant, nhwc, scale_and_zero_point, size


def resize_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    quantization = scale_and_zero_point(model, operator.inputs[0])
    if quantization != scale_and_zero_point(model, operator.outputs[0]):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its input and output are quantized differently; "
                          "TFLite's int8 resizes keep the input's scale and zero point")
    input_shape, output_shape = nhwc(model, operator.inputs[0]), nhwc(model, operator.outputs[0])
    if [int(v) for v in constant(model, operator, 1)] != list(output_shape[1:3]):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its size input disagrees with its output's shape")
    return {"input_size": size(input_shape[1:3]), "input_channel_num": input_shape[3], "output_size": size(output_shape[1:3]),
            "output_channel_num": output_shape[3], "align_corners": bool(operator.option("alignCorners", False)),
            "half_pixel_centers": bool(operator.option("halfPixelCenters", False)), "output_scale": quantization[0],
            "output_zero_point": quantization[1]}, {}
