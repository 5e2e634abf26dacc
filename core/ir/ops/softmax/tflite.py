"""A .tflite's SOFTMAX over the last axis as a softmax layer of the tflite_int8 dialect (TF2IR 1.2). TFLite fixes its
output at scale 1/256, zero point -128; a file with another is refused, as TFLite's Prepare refuses it."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.ops.softmax.affine import OUTPUT_SCALE, OUTPUT_ZERO_POINT
from core.ir.tflite_dialect import input_output


def softmax_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    fields = input_output(model, operator)
    if (float(np.float32(fields["output_scale"])), fields["output_zero_point"]) != (float(np.float32(OUTPUT_SCALE)), OUTPUT_ZERO_POINT):
        raise TfliteError(f"{model.path}: operator {operator.index} (SOFTMAX): its output is quantized at scale "
                          f"{fields['output_scale']}, zero point {fields['output_zero_point']}; TFLite's int8 softmax writes scale "
                          "1/256, zero point -128 (convert the model again)")
    return {"shape": [int(v) for v in model.tensor(operator.inputs[0]).shape[1:]], **fields, "beta": float(operator.option("beta", 1.0))}, {}
