"""A .tflite's GATHER of a constant table by the network's int32 ids as a gather layer of the tflite_int8 dialect."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import TENSOR_TYPES, TfliteError, TfliteModel, TfliteOperator
from core.ir.tflite_dialect import scale_and_zero_point
from core.quantize.runtimes import Runtime


def gather_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    params, ids, result = (model.tensor(index) for index in (operator.inputs[0], operator.inputs[1], operator.outputs[0]))
    if params.data is None or len(params.shape) != 2 or ids.data is not None:
        raise TfliteError(f"{model.path}: operator {operator.index} (GATHER): the IR gathers rows of a constant table [vocabulary, "
                          "depth] by computed ids")
    options = operator.options or {}
    if int(options.get("axis", 0)) != 0 or int(options.get("batchDims", 0)) != 0:
        raise TfliteError(f"{model.path}: operator {operator.index} (GATHER) along axis {options.get('axis')}; the IR gathers rows")
    quantization = scale_and_zero_point(model, params.index)
    if quantization != scale_and_zero_point(model, result.index):
        raise TfliteError(f"{model.path}: operator {operator.index} (GATHER): its table and output are quantized differently")
    return ({"vocabulary": int(params.shape[0]), "input_shape": [int(v) for v in ids.shape[1:]],
             "output_shape": [int(v) for v in result.shape[1:]], "output_scale": quantization[0], "output_zero_point": quantization[1]},
            {"table": np.asarray(params.data, TENSOR_TYPES[params.dtype]).reshape(params.shape)})
