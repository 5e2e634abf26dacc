"""A .tflite's STRIDED_SLICE of height and width (stride 1) as a crop layer of the tflite_int8 dialect."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.ir.tflite_dialect import constant, scale_and_zero_point, size
from core.quantize.runtimes import Runtime

_MASKS = ("ellipsisMask", "newAxisMask", "shrinkAxisMask")


def crop_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    input_shape, output_shape = (tuple(int(v) for v in model.tensor(index).shape) for index in (operator.inputs[0], operator.outputs[0]))
    begin, strides = (np.asarray(constant(model, operator, position), np.int64).reshape(-1) for position in (1, 3))
    quantization = scale_and_zero_point(model, operator.inputs[0])
    if (len(input_shape) != 4 or len(output_shape) != 4 or len(begin) != 4 or np.any(strides != 1) or any(operator.option(mask, 0) for mask in _MASKS)
            or input_shape[3] != output_shape[3] or quantization != scale_and_zero_point(model, operator.outputs[0])):
        raise TfliteError(f"{model.path}: operator {operator.index} (STRIDED_SLICE) of {list(input_shape)} to {list(output_shape)}; the "
                          "tflite_int8 IR slices height and width of an NHWC tensor by stride 1, quantized alike on both sides")
    begin_mask = int(operator.option("beginMask", 0))
    top, left = (0 if begin_mask >> axis & 1 else int(begin[axis]) % input_shape[axis] for axis in (1, 2))
    return {"input_size": size(input_shape[1:3]), "input_channel_num": input_shape[3], "output_size": size(output_shape[1:3]),
            "output_channel_num": output_shape[3],
            "crop": {"top": top, "bottom": input_shape[1] - top - output_shape[1], "left": left, "right": input_shape[2] - left - output_shape[2]},
            "output_scale": quantization[0], "output_zero_point": quantization[1]}, {}
