"""pad in the tflite_int8 dialect (TF2IR 1.2): a .tflite's PAD of height and width by the output's zero point
(real 0), as TFLite's reference Pad fills int8 tensors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.records import OneInputOneOutput, OpSchema, Padding, Size
from core.ir.tflite_dialect import AffineLayer, OutputGrid, constant, nhwc, scale_and_zero_point, size


@dataclass(frozen=True, kw_only=True)
class PadAffineLayer(OutputGrid, OneInputOneOutput, AffineLayer):
    operation: ClassVar[str] = "pad"
    label_prefix: ClassVar[str] = "pad"
    schema: ClassVar[OpSchema] = OpSchema(
        doc='Spatial padding on the tflite_int8 scheme: the input surrounded by `padding` rows and columns of output_zero_point.',
        since="1.2",
    )

    input_size: Size
    input_channel_num: int
    padding: Padding
    output_size: Size
    output_channel_num: int

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # a copy

    def fused_operators(self) -> list[str]:
        return ["pad"]


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


def pad_affine_kernel(layer: PadAffineLayer, params: dict, inputs: list) -> np.ndarray:
    (values,) = inputs
    padding = layer.padding
    return np.pad(values, ((0, 0), (padding.top, padding.bottom), (padding.left, padding.right), (0, 0)),
                  constant_values=layer.output_zero_point)
