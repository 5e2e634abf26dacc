"""The float_conv and float_dwconv IR records (a TF2IR extension, calib.keep_float): a conv or
dwconv layer the calibration keeps in float. It reads int8 at input_log2scale, computes in
float32 with float32 weights and bias, and hands on int8 at output_log2scale: the quantize /
dequantize pair at its borders is part of the layer, so every tensor between layers stays int8."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.activations import Activated
from core.ir.ops.conv.record import ConvWindow
from core.ir.records import IrLayer, OneInputOneOutput, Padding, Shift, Size


@dataclass(frozen=True, kw_only=True)
class FloatConvLayer(ConvWindow, Activated, OneInputOneOutput, IrLayer):
    """float_conv: x = int8 * 2^-input_log2scale (exact in float32); acc = bias, then acc += x * w
    in float32 over the window in the order kh, kw, ci (padding taps skipped), each product and
    sum rounded to float32 (no fused multiply-add); int8 = floor(acc * 2^output_log2scale + 1/2)
    saturated, then the activation's clamp at the output scale (Relu: >= 0; Relu6: <= 6 * 2^ls)."""

    # the fields are the conv's but for its integer scales and shifts, declared here again: a base
    # class holding the shared ones would reorder the conv's keys, which are the spec's (seed 000)
    operation: ClassVar[str] = "float_conv"
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
    label_prefix: ClassVar[str] = "fdw"
    depthwise: ClassVar[bool] = True
