"""The float_conv and float_dwconv IR records (a TF2IR extension, calib.keep_float): a conv or
dwconv layer the calibration keeps in float. It reads int8 at input_log2scale, computes in
float32 with float32 weights and bias, and hands on int8 at output_log2scale: the quantize /
dequantize pair at its borders is part of the layer, so every tensor between layers stays int8."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.activations import Activated
from core.ir.ops.conv.record import ConvWindow
from core.ir.records import IrLayer, OneInputOneOutput, OpSchema, Padding, Shift, Size


@dataclass(frozen=True, kw_only=True)
class FloatConvLayer(ConvWindow, Activated, OneInputOneOutput, IrLayer):
    """float_conv: x = int8 * 2^-input_log2scale (exact in float32); acc = bias, then acc += x * w
    in float32 over the window in the order kh, kw, ci (padding taps skipped), each product and
    sum rounded to float32 (no fused multiply-add); int8 = floor(acc * 2^output_log2scale + 1/2)
    saturated, then the activation's clamp at the output scale (Relu: >= 0; Relu6: <= 6 * 2^ls)."""

    # the fields are the conv's but for its integer scales and shifts, declared here again: a base
    # class holding the shared ones would reorder the conv's keys, which are the spec's (seed 000)
    operation: ClassVar[str] = "float_conv"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('A 2-D convolution kept in float (calib.keep_float; an extension): x = int8 * 2^-input_log2scale in '
             'float32; acc = bias (or 0), then acc += x * w in float32 for kh, kw, ci in that order (taps in the '
             'zero padding skipped), each product and each sum rounded to float32, no fused multiply-add; y = '
             "floor(acc * 2^output_log2scale + 1/2) (in float64, exact) saturated to int8, then the activation's "
             "clamp. Weights and bias are float32 (params/<name>_weight.npy in the conv's HWCiCo layout)."),
        since='1.1',
        fields={'activation_type': {'enum': ['Relu6', 'Relu', 'None'],
                                    'description': 'Applied after the output is quantized, as a clamp at the output '
                                                   'scale: Relu6 to [0, floor(6 * 2^output_log2scale + 1/2)], Relu '
                                                   'to >= 0, None: saturation only.'},
                'load_bias': {'type': 'boolean',
                              'description': 'Whether the layer adds a bias (params/<name>_bias.npy, float32).'},
                'weight_dtype': {'const': 'float32'},
                'bias_dtype': {'const': 'float32'}},
    )
    label_prefix: ClassVar[str] = "fconv"
    depthwise: ClassVar[bool] = False

    activation_type: str
    input_log2scale: int
    output_log2scale: int
    load_bias: bool
    input_channel_num: int
    output_channel_num: int
    input_size: Size
    padding: Padding
    stride: Size
    dilations: Size = Size(1, 1)
    kernel_size: Size
    output_size: Size
    input_dtype: str = "int8"
    output_dtype: str = "int8"
    weight_dtype: str = "float32"
    bias_dtype: str = "float32"

    def shifts(self) -> list[Shift]:
        return []  # scales are float multiplications by powers of two, not shifts

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # a float32 accumulator

    def fused_operators(self) -> list[str]:
        core = "float_depthwise_conv2d" if self.depthwise else "float_conv2d"
        return ["dequantize", core, *(["float_bias_add"] if self.load_bias else []), "quantize", *self.activation_operators()]


@dataclass(frozen=True, kw_only=True)
class FloatDwconvLayer(FloatConvLayer):
    """float_dwconv: float_conv per channel (weights HWC, channel multiplier 1)."""

    operation: ClassVar[str] = "float_dwconv"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('A depthwise convolution kept in float (calib.keep_float; an extension): x = int8 * 2^-input_log2scale '
             'in float32; acc = bias (or 0), then acc += x * w in float32 for kh, kw, ci in that order (taps in the '
             'zero padding skipped), each product and each sum rounded to float32, no fused multiply-add; y = '
             "floor(acc * 2^output_log2scale + 1/2) (in float64, exact) saturated to int8, then the activation's "
             "clamp. Weights and bias are float32 (params/<name>_weight.npy in the dwconv's HWC layout)."),
        since='1.1',
        fields=FloatConvLayer.schema.fields,  # the same fields, meaning the same
    )
    label_prefix: ClassVar[str] = "fdw"
    depthwise: ClassVar[bool] = True
