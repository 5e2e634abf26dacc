"""conv and dwconv in the tflite_int8 dialect (TF2IR 1.2): the record, read from a .tflite's CONV_2D,
DEPTHWISE_CONV_2D and FULLY_CONNECTED (a dense layer: the 1x1 conv of a 1x1 image), and the kernel
(affine.py's integers). Constants: weight int8 OHWI (TFLite's layout; dwconv 1HWC, dense [O, 1, 1, K]),
bias int32 [O], multiplier and shift int32 [O] (the requantization of input scale x weight scale /
output scale, per output channel)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import DOUBLE_ROUNDING, Runtime
from core.ir.ops.conv.affine import fully_connected_affine, requantization, sum_bounds
from core.ir.ops.conv.affine_fast import conv_affine_fast
from core.ir.ops.conv.record import ConvWindow
from core.ir.records import OneInputOneOutput, OpSchema, Padding, Size
from core.ir.tflite_dialect import AffineGrids, AffineLayer, clamp_fields, input_output, nhwc, window_fields

INT32_MAX = 2**31 - 1
PARAM_KINDS = ("weight", "bias", "multiplier", "shift")


@dataclass(frozen=True, kw_only=True)
class ConvAffineLayer(AffineGrids, ConvWindow, OneInputOneOutput, AffineLayer):
    operation: ClassVar[str] = "conv"
    label_prefix: ClassVar[str] = "conv"
    depthwise: ClassVar[bool] = False
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('2-D convolution on the tflite_int8 scheme (reference_integer_ops::ConvPerChannel, FullyConnected): per '
             'output channel the int32 sum of weight x (input - input_zero_point) over the window, taps in the padding '
             'skipped, plus the int32 bias; rescaled by multiplier[c] and shift[c] (rounding "double": '
             'SaturatingRoundingDoublingHighMul of the sum shifted left by max(shift, 0), then RoundingDivideByPOT by '
             'max(-shift, 0); "single": one rounding of the 64-bit product); plus output_zero_point; clamped to '
             '[output_min, output_max]. Weight OHWI int8 (symmetric), bias, multiplier, shift int32 [O].'),
        since="1.2",
    )

    input_scale: float
    input_zero_point: int
    output_min: int
    output_max: int
    rounding: str
    load_bias: bool
    input_channel_num: int
    output_channel_num: int
    input_size: Size
    padding: Padding
    stride: Size
    dilations: Size
    kernel_size: Size
    output_size: Size

    def accumulator_bound(self, params: dict | None = None) -> int:
        if params is None:  # any int8 weights and int32 bias
            return self.reduction * 128 * 255 + 2**31 - 1
        bias = np.abs(params["bias"].astype(np.int64)) if self.load_bias else 0
        return int((sum_bounds(params["weight"], self.depthwise) + bias).max())

    @property
    def dense(self) -> bool:
        """A fully connected layer: a 1x1 convolution of a 1x1 image."""
        return (not self.depthwise and (self.input_size.height, self.input_size.width) == (1, 1)
                and (self.kernel_size.height, self.kernel_size.width) == (1, 1))

    def fused_operators(self) -> list[str]:
        core = "depthwise_conv2d" if self.depthwise else ("fully_connected" if self.dense else "conv2d")
        return [core, *(["bias_add"] if self.load_bias else []), "requantize", "clamp"]


@dataclass(frozen=True, kw_only=True)
class DwconvAffineLayer(ConvAffineLayer):
    operation: ClassVar[str] = "dwconv"
    label_prefix: ClassVar[str] = "dw"
    depthwise: ClassVar[bool] = True
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Depthwise convolution on the tflite_int8 scheme (reference_integer_ops::DepthwiseConvPerChannel): conv\'s '
             'arithmetic per channel; weight 1HW(C x multiplier) int8.'),
        since="1.2",
    )


def conv_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    """The fields and constants of a CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED operator; the runtime says how
    FULLY_CONNECTED rounds its requantization (the convolutions round twice on every runtime)."""
    weight = model.tensor(operator.inputs[1])
    if weight.data is None or weight.quantization is None:
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its weight {weight.name} is not a quantized constant")
    dense = operator.name == "FULLY_CONNECTED"
    input_shape, output_shape = nhwc(model, operator.inputs[0]), nhwc(model, operator.outputs[0])
    if dense:  # any input shape: its K values per image are the 1x1 image's channels
        input_shape = (input_shape[0], 1, 1, int(weight.shape[1]))
    weights = weight.data.reshape(len(weight.data), 1, 1, -1) if dense else weight.data
    fields = {**input_output(model, operator), **clamp_fields(model, operator),
              **window_fields(operator, input_shape, output_shape, weights.shape[1:3]),
              "rounding": runtime.fully_connected_rounding if dense else DOUBLE_ROUNDING, "load_bias": len(operator.inputs) > 2 and operator.inputs[2] >= 0}
    multipliers, shifts = requantization(fields["input_scale"], weight.quantization.scale, fields["output_scale"])
    channels = output_shape[3]
    params = {"weight": np.ascontiguousarray(weights, np.int8),
              "multiplier": np.broadcast_to(multipliers, (channels,)).astype(np.int32),
              "shift": np.broadcast_to(shifts, (channels,)).astype(np.int32)}
    if fields["load_bias"]:
        params["bias"] = np.ascontiguousarray(model.tensor(operator.inputs[2]).data, np.int32)
    bias_magnitude = np.abs(params["bias"].astype(np.int64)) if fields["load_bias"] else 0
    bound = int((sum_bounds(weights, operator.name == "DEPTHWISE_CONV_2D") + bias_magnitude).max())
    if bound > INT32_MAX:
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its sums can reach {bound}, beyond the int32 "
                          "accumulators TFLite's kernels (and the generated C) sum in; smaller weights or fewer of them per output")
    return fields, params


def conv_affine_kernel(layer: ConvAffineLayer, params: dict, inputs: list) -> np.ndarray:
    (values,) = inputs
    bias, clamp = params.get("bias"), (layer.output_min, layer.output_max)
    multipliers, shifts = params["multiplier"].astype(np.int64), params["shift"].astype(np.int64)
    if layer.dense:
        weight = params["weight"].reshape(layer.output_channel_num, -1)
        result = fully_connected_affine(values, layer.input_zero_point, weight, bias, multipliers, shifts, layer.output_zero_point, clamp,
                                        layer.rounding)
        return result.reshape(len(values), *layer.shape_of_output())
    padding = layer.padding
    return conv_affine_fast(values, layer.input_zero_point, params["weight"], bias, multipliers, shifts, layer.output_zero_point,
                            clamp, layer.stride.pair(), layer.dilations.pair(),
                            (padding.top, padding.bottom, padding.left, padding.right), depthwise=layer.depthwise)
