"""The conv and dwconv IR records (seed 000, 4.2 CONV/DWCONV) and what they imply: shapes,
multiply-accumulates, shifts, the accumulator bound, the window geometry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.ir.activations import Activated
from core.ir.fixedpoint import accumulator_bound
from core.ir.records import IrLayer, OneInputOneOutput, OpSchema, Padding, Shift, Size
from core.ir.window import Window


class ConvWindow:
    """What a convolution record (integer or float) knows of its window: the products summed into
    one output, its multiply-accumulates, its label and its geometry."""

    depthwise: ClassVar[bool] = False
    label_prefix: ClassVar[str] = "conv"

    @property
    def reduction(self) -> int:
        """Products summed into one output: the window (dwconv), times the input channels (conv)."""
        taps = self.kernel_size.height * self.kernel_size.width
        return taps if self.depthwise else taps * self.input_channel_num

    def macs(self) -> int:
        return int(np.prod(self.shape_of_output())) * self.reduction

    def label(self) -> str:
        kernel, stride = self.kernel_size, self.stride
        return f"{self.label_prefix}{kernel.height}x{kernel.width}" + (f"/{stride.height}" if stride.height > 1 else "")

    @property
    def window(self) -> Window:
        return Window.of(self)


@dataclass(frozen=True, kw_only=True)
class ConvLayer(ConvWindow, Activated, OneInputOneOutput, IrLayer):
    """conv: int8 NHWC in, HWCiCo weights, int32 sums + bias << bias_shift, >> output_shift
    rounded half up, the activation's clamp, int8 out."""

    operation: ClassVar[str] = "conv"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('2-D convolution: int32 accumulation of int8 x int8 over the (dilated) window with zero padding, plus '
             '(bias << bias_shift), shifted right by output_shift with round half up, activation, saturation.'),
    )
    label_prefix: ClassVar[str] = "conv"
    depthwise: ClassVar[bool] = False

    activation_type: str
    input_log2scale: int
    weight_log2scale: int
    bias_log2scale: int
    output_log2scale: int
    output_shift: int
    bias_shift: int
    load_bias: bool
    input_channel_num: int
    output_channel_num: int
    input_size: Size
    padding: Padding
    stride: Size
    dilations: Size = Size(1, 1)  # absent in IRs that predate it: no dilation
    kernel_size: Size
    output_size: Size
    input_dtype: str = "int8"
    output_dtype: str = "int8"
    weight_dtype: str = "int8"
    bias_dtype: str = "int8"

    def shifts(self) -> list[Shift]:
        return [Shift("output_shift", self.output_shift), *([Shift("bias_shift", self.bias_shift)] if self.load_bias else [])]

    def accumulator_bound(self, params: dict | None = None) -> int:
        bias_shift = self.bias_shift if self.load_bias else 0
        if params is None:  # any int8 weights and bias
            return accumulator_bound(self.reduction * 128, 128 if self.load_bias else None, bias_shift, self.output_shift)
        weight = np.abs(np.asarray(params["weight"], np.int64))
        per_channel = weight.reshape(-1, weight.shape[-1]).sum(axis=0)
        bias = params["bias"] if self.load_bias else None
        return accumulator_bound(per_channel, bias, bias_shift, self.output_shift)

    def fused_operators(self) -> list[str]:
        core = "depthwise_conv2d" if self.depthwise else "conv2d"
        return [core, *(["bias_add"] if self.load_bias else []), "requantize", *self.activation_operators()]


@dataclass(frozen=True, kw_only=True)
class DwconvLayer(ConvLayer):
    """dwconv: conv per channel (weights HWC, channel multiplier 1)."""

    operation: ClassVar[str] = "dwconv"
    schema: ClassVar[OpSchema] = OpSchema(
        doc='Depthwise convolution (channel multiplier 1), computed as conv per channel.',
    )
    label_prefix: ClassVar[str] = "dw"
    depthwise: ClassVar[bool] = True
