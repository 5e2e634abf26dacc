"""A .tflite's PAD of height and width as a pad layer of the tflite_int8 dialect."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.tflite_dialect import constant, nhwc, scale_and_zero_point, size


def pad_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    quantization = scale_and_zero_point(model, operator.inputs[0])
    paddings = np.asarray(constant(model, operator, 1), np.int64).reshape(-1, 2)
    input_shape, output_shape = nhwc(model, operator.inputs[0]), nhwc(model, operator.outputs[0])
    if paddings.shape != (4, 2) or paddings[0].any() or paddings[3].any() or quantization != scale_and_zero_point(model, operator.outputs[0]):
        raise TfliteError(f"{model.path}: operator {operator.index} (PAD) by {paddings.tolist()}; the tflite_int8 IR pads height and width "
                          "of an NHWC tensor, quantized alike on both sides")
    (top, bottom), (left, right) = paddings[1].tolist(), paddings[2].tolist()
    return {"input_size": size(input_shape[1:3]), "input_channel_num": input_shape[3], "output_size": size(output_shape[1:3]),
            "output_channel_num": output_shape[3], "padding": {"top": top, "bottom": bottom, "left": left, "right": right},
            "output_scale": quantization[0], "output_zero_point": quantization[1]}, {}

