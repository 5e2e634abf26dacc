"""A .tflite's STRIDED_SLICE (stride 1) and SLICE of height and width as a crop layer of the tflite_int8 dialect."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.ir.tflite_dialect import constant, scale_and_zero_point, size
from core.quantize.runtimes import Runtime

_MASKS = ("ellipsisMask", "newAxisMask", "shrinkAxisMask")


def crop_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    begin, strides = (np.asarray(constant(model, operator, position), np.int64).reshape(-1) for position in (1, 3))
    begin_mask = int(operator.option("beginMask", 0))
    begin = np.where([begin_mask >> axis & 1 for axis in range(len(begin))], 0, begin)
    return _crop_fields(model, operator, begin, bool(np.any(strides != 1) or any(operator.option(mask, 0) for mask in _MASKS)))


def slice_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    """SLICE by a constant begin and size (a size of -1: to the end), as litert-torch and onnx2tf write a crop."""
    return _crop_fields(model, operator, np.asarray(constant(model, operator, 1), np.int64).reshape(-1), False)


def _crop_fields(model: TfliteModel, operator: TfliteOperator, begin: np.ndarray, strided: bool) -> tuple[dict, dict]:
    """The crop taking the output's extent from `begin` (its axes 1 and 2: top and left) of the input."""
    input_shape, output_shape = (tuple(int(v) for v in model.tensor(index).shape) for index in (operator.inputs[0], operator.outputs[0]))
    quantization = scale_and_zero_point(model, operator.inputs[0])
    if (len(input_shape) != 4 or len(output_shape) != 4 or len(begin) != 4 or strided or input_shape[3] != output_shape[3]
            or quantization != scale_and_zero_point(model, operator.outputs[0])):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}) of {list(input_shape)} to {list(output_shape)}; the "
                          "tflite_int8 IR slices height and width of an NHWC tensor by stride 1, quantized alike on both sides")
    top, left = (int(begin[axis]) % input_shape[axis] for axis in (1, 2))
    return {"input_size": size(input_shape[1:3]), "input_channel_num": input_shape[3], "output_size": size(output_shape[1:3]),
            "output_channel_num": output_shape[3],
            "crop": {"top": top, "bottom": input_shape[1] - top - output_shape[1], "left": left, "right": input_shape[2] - left - output_shape[2]},
            "output_scale": quantization[0], "output_zero_point": quantization[1]}, {}
