"""A .tflite's TRANSPOSE as a transpose layer of the tflite_int8 dialect: each image's axes permuted, the same scale and
zero point."""

from __future__ import annotations

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.ir.tflite_dialect import constant, scale_and_zero_point
from core.quantize.runtimes import Runtime


def transpose_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    source, result = (model.tensor(index) for index in (operator.inputs[0], operator.outputs[0]))
    permutation = [int(axis) for axis in constant(model, operator, 1).reshape(-1)]
    if not permutation or permutation[0] != 0:
        raise TfliteError(f"{model.path}: operator {operator.index} (TRANSPOSE) by {permutation} moves the batch axis; the IR "
                          "permutes each image's axes")
    quantization = scale_and_zero_point(model, source.index)
    if quantization != scale_and_zero_point(model, result.index):
        raise TfliteError(f"{model.path}: operator {operator.index} (TRANSPOSE): its input and output are quantized differently")
    return {"permutation": [axis - 1 for axis in permutation[1:]], "input_shape": [int(v) for v in source.shape[1:]],
            "output_shape": [int(v) for v in result.shape[1:]], "output_scale": quantization[0],
            "output_zero_point": quantization[1]}, {}
