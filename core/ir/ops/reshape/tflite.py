"""A .tflite's RESHAPE (and EXPAND_DIMS and SQUEEZE, reshapes by an axis: a Conv1D's) as a reshape layer of the
tflite_int8 dialect: the same bytes in another shape, the same scale and zero point."""

from __future__ import annotations

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.tflite_dialect import scale_and_zero_point


def reshape_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    source, result = (model.tensor(index) for index in (operator.inputs[0], operator.outputs[0]))
    quantization = scale_and_zero_point(model, source.index)
    if quantization != scale_and_zero_point(model, result.index):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its input and output are quantized differently")
    return {"input_shape": [int(v) for v in source.shape[1:]], "output_shape": [int(v) for v in result.shape[1:]],
            "output_scale": quantization[0], "output_zero_point": quantization[1]}, {}

