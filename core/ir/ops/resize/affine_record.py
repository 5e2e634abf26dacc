"""resize_nearest and resize_bilinear from a .tflite (TF2IR 1.2): RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR, input
and output quantized alike (TFLite's int8 resizes keep the input's); the tflite_int8 dialect's resize_bilinear
record and kernel (affine.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.ops.resize.affine import resize_bilinear_affine
from core.ir.records import OneInputOneOutput, OpSchema, Size
from core.ir.tflite_dialect import AffineLayer, OutputGrid, constant, nhwc, scale_and_zero_point, size


@dataclass(frozen=True, kw_only=True)
class ResizeBilinearAffineLayer(OutputGrid, OneInputOneOutput, AffineLayer):
    operation: ClassVar[str] = "resize_bilinear"
    label_prefix: ClassVar[str] = "rsz"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Bilinear resize on the tflite_int8 scheme (reference_ops::ResizeBilinearInteger): positions in 2^-10 '
             'units, each output the weighted sum of four inputs in 2^-20 units, rounded half away from zero.'),
        since="1.2",
    )

    input_size: Size
    input_channel_num: int
    output_size: Size
    output_channel_num: int
    align_corners: bool
    half_pixel_centers: bool

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> int:
        return 128 << 20  # four taps x 2^20 of weight

    def fused_operators(self) -> list[str]:
        return [self.operation]


def resize_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    quantization = scale_and_zero_point(model, operator.inputs[0])
    if quantization != scale_and_zero_point(model, operator.outputs[0]):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its input and output are quantized differently; "
                          "TFLite's int8 resizes keep the input's scale and zero point")
    input_shape, output_shape = nhwc(model, operator.inputs[0]), nhwc(model, operator.outputs[0])
    if [int(v) for v in constant(model, operator, 1)] != list(output_shape[1:3]):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its size input disagrees with its output's shape")
    return {"input_size": size(input_shape[1:3]), "input_channel_num": input_shape[3], "output_size": size(output_shape[1:3]),
            "output_channel_num": output_shape[3], "align_corners": bool(operator.option("alignCorners", False)),
            "half_pixel_centers": bool(operator.option("halfPixelCenters", False)), "output_scale": quantization[0],
            "output_zero_point": quantization[1]}, {}


def resize_bilinear_affine_kernel(layer: ResizeBilinearAffineLayer, params: dict, inputs: list) -> np.ndarray:
    (values,) = inputs
    return resize_bilinear_affine(values, layer.output_size.pair(), layer.align_corners, layer.half_pixel_centers)
