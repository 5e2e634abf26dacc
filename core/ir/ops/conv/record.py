"""The conv and dwconv IR record, of both dialects (seed 000, 4.2 CONV/DWCONV; the tflite_int8 dialect's since 1.2),
and what it implies: shapes, multiply-accumulates, shifts, the accumulator bound, the window geometry, and its typed
requantization, of which TF2IR's power-of-two shifts are the special case: TF2IR's `ShiftRequantization` (the sum plus
bias << bias_shift, >> output_shift rounded half up, the activation's clamp) or TFLite's `ChannelRequantization`
(per output channel a multiplier and a shift, zero points, a rounding mode)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.ir.activations import Activated
from core.ir.fixedpoint import accumulator_bound
from core.ir.ops.conv.affine import sum_bounds
from core.ir.records import (INPUT_GRID, by_arithmetic, OUTPUT_GRID, InputOutputGrids, IrLayer, OneInputOneOutput, OpSchema, Padding, Shift, Size,
                             grid_field, written_in)
from core.ir.window import Window
from core.quantize.grid import AffineGrid, Pow2Grid


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


@dataclass(frozen=True)
class ShiftRequantization:
    """TF2IR's (seed 000): (sum + bias << bias_shift) >> output_shift, rounded half up, clamped to the activation's
    range: a multiplier of one, a power-of-two shift, zero points 0 (core/ir/ops/conv/requantize.py)."""

    output_shift: int
    bias_shift: int
    clamp: tuple[int, int]


@dataclass(frozen=True)
class ChannelRequantization:
    """TFLite's (reference_integer_ops::ConvPerChannel): per output channel c, the sum of weight x (input -
    input_zero_point) plus the int32 bias, times multiplier[c] x 2^shift[c] (the constants params/<name>_multiplier and
    _shift) rounding as `rounding` says, plus output_zero_point, clamped."""

    input_zero_point: int
    output_zero_point: int
    rounding: str  # "double" or "single" (core/ir/fields.py)
    clamp: tuple[int, int]


def by_requantization(implementations: dict):
    """What computes a record (a kernel, a C emitter, a lowering...) as `implementations` says for the kind of its
    requantization."""
    return by_arithmetic("requantization", implementations)


@dataclass(frozen=True, kw_only=True)
class ConvLayer(ConvWindow, Activated, InputOutputGrids, OneInputOneOutput, IrLayer):
    """conv: int8 NHWC in, int32 sums over the window, requantized (`requantization`) to int8 out."""

    operation: ClassVar[str] = "conv"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": ('2-D convolution: int32 accumulation of int8 x int8 over the (dilated) window with zero padding, plus '
                       '(bias << bias_shift), shifted right by output_shift with round half up, activation, saturation.'),
             "tflite_int8": ('2-D convolution on the tflite_int8 scheme (reference_integer_ops::ConvPerChannel, FullyConnected): '
                             'per output channel the int32 sum of weight x (input - input_zero_point) over the window, taps in the '
                             'padding skipped, plus the int32 bias; rescaled by multiplier[c] and shift[c] (rounding "double": '
                             'SaturatingRoundingDoublingHighMul of the sum shifted left by max(shift, 0), then RoundingDivideByPOT '
                             'by max(-shift, 0); "single": one rounding of the 64-bit product); plus output_zero_point; clamped to '
                             '[output_min, output_max]. Weight OHWI int8 (symmetric), bias, multiplier, shift int32 [O].')},
        since={"tf2ir": None, "tflite_int8": "1.2"},
    )
    label_prefix: ClassVar[str] = "conv"
    depthwise: ClassVar[bool] = False

    input_grid: Pow2Grid | AffineGrid = grid_field(INPUT_GRID)
    output_grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)
    load_bias: bool
    input_channel_num: int
    output_channel_num: int
    input_size: Size
    padding: Padding
    stride: Size
    dilations: Size = Size(1, 1)  # absent in TF2IR IRs that predate it: no dilation
    kernel_size: Size
    output_size: Size
    # TF2IR's: the weight's and bias's grids, the shifts, the activation, the element types
    activation_type: str = written_in("tf2ir", "None")
    weight_log2scale: int | None = written_in("tf2ir", None)
    bias_log2scale: int | None = written_in("tf2ir", None)
    output_shift: int | None = written_in("tf2ir", None)
    bias_shift: int | None = written_in("tf2ir", None)
    input_dtype: str = written_in("tf2ir", "int8")
    output_dtype: str = written_in("tf2ir", "int8")
    weight_dtype: str = written_in("tf2ir", "int8")
    bias_dtype: str = written_in("tf2ir", "int8")
    # the tflite_int8 dialect's: the fused activation's clamp, how the requantization rounds
    output_min: int = written_in("tflite_int8", -128)
    output_max: int = written_in("tflite_int8", 127)
    rounding: str = written_in("tflite_int8", "double")

    @property
    def requantization(self) -> ShiftRequantization | ChannelRequantization:
        if self.on_pow2_grids:
            return ShiftRequantization(int(self.output_shift), int(self.bias_shift), self.clamp())
        return ChannelRequantization(self.input_grid.zero_point, self.output_grid.zero_point, self.rounding,
                                     (self.output_min, self.output_max))

    @property
    def dense(self) -> bool:
        """The tflite_int8 dialect's fully connected layer: a 1x1 convolution of a 1x1 image."""
        return (not self.depthwise and not self.on_pow2_grids and (self.input_size.height, self.input_size.width) == (1, 1)
                and (self.kernel_size.height, self.kernel_size.width) == (1, 1))

    def shifts(self) -> list[Shift]:
        if not self.on_pow2_grids:
            return []  # TFLite's shifts are constants its arithmetic bounds itself, no target shifter's
        return [Shift("output_shift", self.output_shift), *([Shift("bias_shift", self.bias_shift)] if self.load_bias else [])]

    def accumulator_bound(self, params: dict | None = None) -> int:
        return (self._shift_accumulator_bound if self.on_pow2_grids else self._channel_accumulator_bound)(params)

    def _shift_accumulator_bound(self, params: dict | None) -> int:
        bias_shift = self.bias_shift if self.load_bias else 0
        if params is None:  # any int8 weights and bias
            return accumulator_bound(self.reduction * 128, 128 if self.load_bias else None, bias_shift, self.output_shift)
        weight = np.abs(np.asarray(params["weight"], np.int64))
        per_channel = weight.reshape(-1, weight.shape[-1]).sum(axis=0)
        bias = params["bias"] if self.load_bias else None
        return accumulator_bound(per_channel, bias, bias_shift, self.output_shift)

    def _channel_accumulator_bound(self, params: dict | None) -> int:
        if params is None:  # any int8 weights and int32 bias
            return self.reduction * 128 * 255 + 2**31 - 1
        bias = np.abs(params["bias"].astype(np.int64)) if self.load_bias else 0
        return int((sum_bounds(params["weight"], self.depthwise) + bias).max())

    def fused_operators(self) -> list[str]:
        core = "depthwise_conv2d" if self.depthwise else ("fully_connected" if self.dense else "conv2d")
        clamp = self.activation_operators() if self.on_pow2_grids else ["clamp"]
        return [core, *(["bias_add"] if self.load_bias else []), "requantize", *clamp]


@dataclass(frozen=True, kw_only=True)
class DwconvLayer(ConvLayer):
    """dwconv: conv per channel (TF2IR's weights HWC, channel multiplier 1; TFLite's 1HW(C x multiplier))."""

    operation: ClassVar[str] = "dwconv"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": 'Depthwise convolution (channel multiplier 1), computed as conv per channel.',
             "tflite_int8": ('Depthwise convolution on the tflite_int8 scheme (reference_integer_ops::DepthwiseConvPerChannel): '
                             'conv\'s arithmetic per channel; weight 1HW(C x multiplier) int8.')},
        since={"tf2ir": None, "tflite_int8": "1.2"},
    )
    label_prefix: ClassVar[str] = "dw"
    depthwise: ClassVar[bool] = True
