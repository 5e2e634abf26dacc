"""A .tflite's CONCATENATION as a concat layer of the tflite_int8 dialect (TF2IR 1.2): every input quantized as the
output (TFLite's converter, and the .tflite writer, requantize the others first with an int8 QUANTIZE: a lut
layer)."""

from __future__ import annotations

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.tflite_dialect import scale_and_zero_point


def concat_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    output = scale_and_zero_point(model, operator.outputs[0])
    rescaled = [index for index in operator.inputs if scale_and_zero_point(model, index) != output]
    if rescaled or operator.activation != "NONE" or any(model.tensor(index).data is not None for index in operator.inputs):
        raise TfliteError(f"{model.path}: operator {operator.index} (CONCATENATION): inputs {rescaled} at another scale or zero point "
                          "than the output, a constant input or a fused activation; TFLite's converter requantizes the inputs first")
    shape = [int(v) for v in model.tensor(operator.outputs[0]).shape]
    return {"axis": operator.option("axis", 0) % len(shape) - 1, "shape": shape[1:],
            "input_shapes": [[int(v) for v in model.tensor(index).shape[1:]] for index in operator.inputs],
            "output_scale": output[0], "output_zero_point": output[1]}, {}
