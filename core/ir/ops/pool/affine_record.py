"""avg_pool and max_pool in the tflite_int8 dialect (TF2IR 1.2): records read from a .tflite's
AVERAGE_POOL_2D, MAX_POOL_2D and MEAN over height and width (a global average: the window is the image),
and their kernel (affine.py). A pool's input and output share a scale and zero point; MEAN's may differ
(its multiplier and shift rescale them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.ops.pool.affine import average_pool_affine, max_pool_affine, mean_affine
from core.ir.records import OneInputOneOutput, OpSchema, Padding, Size, omitted_when
from core.ir.window import Window
from core.ir.tflite_dialect import AffineGrids, AffineLayer, clamp_fields, constant, input_output, nhwc, window_fields
from core.quantize.tflite_math import quantize_multiplier

_INTEGER = {"type": "integer"}


@dataclass(frozen=True, kw_only=True)
class PoolAffineLayer(AffineGrids, OneInputOneOutput, AffineLayer):
    input_scale: float
    input_zero_point: int
    output_min: int
    output_max: int
    input_channel_num: int
    input_size: Size
    kernel_size: Size
    stride: Size
    padding: Padding
    output_channel_num: int
    output_size: Size

    averages: ClassVar[bool] = False

    @property
    def window(self) -> Window:
        return Window.of(self)

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> int:
        return self.kernel_size.height * self.kernel_size.width * 255

    def label(self) -> str:
        kernel, stride = self.kernel_size, self.stride
        return f"{self.label_prefix}{kernel.height}x{kernel.width}" + (f"/{stride.height}" if stride.height > 1 else "")


@dataclass(frozen=True, kw_only=True)
class AvgPoolAffineLayer(PoolAffineLayer):
    operation: ClassVar[str] = "avg_pool"
    label_prefix: ClassVar[str] = "avg"
    averages: ClassVar[bool] = True
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Average pooling on the tflite_int8 scheme. Without multiplier (AVERAGE_POOL_2D, input and output '
             'quantized alike): the int32 sum of the window\'s elements inside the image divided by their count, '
             'rounding half away from zero, clamped to [output_min, output_max]. With multiplier and shift (MEAN over '
             'the whole image, reference_ops::QuantizedMeanOrSum): the sum less input_zero_point x count, rescaled by '
             'the multiplier shifted left by h = min(floor(log2(count)), 32, 31 + shift) and divided by count, with '
             'shift - h, plus output_zero_point, saturated.'),
        since="1.2",
        fields={"multiplier": {**_INTEGER, "description": "MEAN: input scale / output scale as a Q31 multiplier"},
                "shift": {**_INTEGER, "description": "MEAN: its exponent (TFLite's convention: positive shifts left)"}},
    )

    multiplier: int | None = omitted_when(None)
    shift: int | None = omitted_when(None)

    def fused_operators(self) -> list[str]:
        return ["mean", "requantize"] if self.multiplier is not None else ["avg_pool", "clamp"]


@dataclass(frozen=True, kw_only=True)
class MaxPoolAffineLayer(PoolAffineLayer):
    operation: ClassVar[str] = "max_pool"
    label_prefix: ClassVar[str] = "max"
    schema: ClassVar[OpSchema] = OpSchema(
        doc='Max pooling on the tflite_int8 scheme: the largest element of the window inside the image, clamped.',
        since="1.2",
    )

    def fused_operators(self) -> list[str]:
        return ["max_pool", "clamp"]


def pool_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    kernel = (operator.option("filterHeight"), operator.option("filterWidth"))
    fields = {**input_output(model, operator), **clamp_fields(model, operator),
              **window_fields(operator, nhwc(model, operator.inputs[0]), nhwc(model, operator.outputs[0]), kernel)}
    del fields["dilations"]
    if (fields["input_scale"], fields["input_zero_point"]) != (fields["output_scale"], fields["output_zero_point"]):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its input and output are quantized differently; "
                          "TFLite's int8 pools keep the input's scale and zero point")
    return fields, {}


def mean_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    input_shape = nhwc(model, operator.inputs[0])
    axes = sorted(int(axis) % len(input_shape) for axis in np.atleast_1d(constant(model, operator, 1)))
    if axes != [1, 2] or len(input_shape) != 4:
        raise TfliteError(f"{model.path}: operator {operator.index} (MEAN) over axes {axes} of a {list(input_shape)} tensor; the "
                          "tflite_int8 IR takes a mean over height and width (a global average pool)")
    fields = {**input_output(model, operator), "output_min": -128, "output_max": 127,
              "input_size": {"height": input_shape[1], "width": input_shape[2]}, "input_channel_num": input_shape[3],
              "kernel_size": {"height": input_shape[1], "width": input_shape[2]}, "stride": {"height": 1, "width": 1},
              "padding": {"top": 0, "bottom": 0, "left": 0, "right": 0}, "output_size": {"height": 1, "width": 1},
              "output_channel_num": input_shape[3]}
    fields["multiplier"], fields["shift"] = quantize_multiplier(float(np.float32(fields["input_scale"])) /
                                                                float(np.float32(fields["output_scale"])))
    return fields, {}


def avg_pool_affine_kernel(layer: AvgPoolAffineLayer, params: dict, inputs: list) -> np.ndarray:
    (values,) = inputs
    if layer.multiplier is not None:
        return mean_affine(values, (1, 2), True, layer.input_zero_point, layer.multiplier, layer.shift, layer.output_zero_point)
    return average_pool_affine(values, layer.kernel_size.pair(), layer.stride.pair(), layer.padding.as_list(),
                               (layer.output_min, layer.output_max))


def max_pool_affine_kernel(layer: MaxPoolAffineLayer, params: dict, inputs: list) -> np.ndarray:
    (values,) = inputs
    return max_pool_affine(values, layer.kernel_size.pair(), layer.stride.pair(), layer.padding.as_list(),
                           (layer.output_min, layer.output_max))
