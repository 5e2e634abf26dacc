"""A .tflite's SOFTMAX over the last axis as a softmax layer of the tflite_int8 dialect (TF2IR 1.2). TFLite fixes its
output at scale 1/256, zero point -128 (int16: 1/32768, zero point 0); a file with another is refused, as TFLite's Prepare refuses it."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.ops.softmax.affine import INT16_OUTPUT_SCALE, INT16_OUTPUT_ZERO_POINT, OUTPUT_SCALE, OUTPUT_ZERO_POINT
from core.ir.tflite_dialect import activation_bits, input_output


# TFLite's required output grid, by the activations' width
REQUIRED_OUTPUTS = {8: (OUTPUT_SCALE, OUTPUT_ZERO_POINT, "1/256, zero point -128"),
                    16: (INT16_OUTPUT_SCALE, INT16_OUTPUT_ZERO_POINT, "1/32768, zero point 0")}


def softmax_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    fields = input_output(model, operator)
    bits = activation_bits(model, operator)
    scale, zero_point, words = REQUIRED_OUTPUTS[bits]
    if (float(np.float32(fields["output_scale"])), fields["output_zero_point"]) != (float(np.float32(scale)), zero_point):
        raise TfliteError(f"{model.path}: operator {operator.index} (SOFTMAX): its output is quantized at scale "
                          f"{fields['output_scale']}, zero point {fields['output_zero_point']}; TFLite's int{bits} softmax writes scale "
                          f"{words} (convert the model again)")
    precision = {"lut_precision": runtime.int16_lut_precision} if bits == 16 and runtime.int16_lut_precision != "double" else {}
    return {"shape": [int(v) for v in model.tensor(operator.inputs[0]).shape[1:]], **fields, "beta": float(operator.option("beta", 1.0)),
            **precision}, {}
