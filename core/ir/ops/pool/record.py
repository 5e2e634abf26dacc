"""The avg_pool and max_pool IR records (seed 000, 4.2 AVGPOOL/MAXPOOL), each of both dialects: a window over each
channel, the input on one grid and the output on another (TF2IR: log2scales; the tflite_int8 dialect: one scale and
zero point, or, for MEAN, two), the output clamped to [output_min, output_max] (TF2IR's: saturation to int8).
How avg_pool's mean is rounded is typed (`averaging`): a window mean, rounded half up (TF2IR) or half away from zero
(TFLite's AVERAGE_POOL_2D), or TFLite's MEAN rescaled by a multiplier."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.records import INPUT_GRID, OUTPUT_GRID, InputOutputGrids, IrLayer, OneInputOneOutput, OpSchema, Padding, Shift, Size, grid_field, written_in
from core.ir.window import Window
from core.quantize.grid import AffineGrid, Pow2Grid

_INTEGER = {"type": "integer"}


@dataclass(frozen=True)
class WindowMean:
    """The window's sum, shifted left by `pre_shift`, divided by n (its elements inside the image) and rounded
    `rounding`: "half_up" (TF2IR: floor((2 * sum + n) / (2 * n))) or "half_away" (TFLite's AVERAGE_POOL_2D: C's
    truncating division of sum +- n / 2)."""

    pre_shift: int
    rounding: str


@dataclass(frozen=True)
class RescaledMean:
    """TFLite's MEAN over the image (reference_ops::QuantizedMeanOrSum): the sum less input_zero_point x n, rescaled by
    the multiplier with 1 / n folded in (affine.mean_requantization), plus output_zero_point."""

    input_zero_point: int
    multiplier: int
    shift: int
    output_zero_point: int


@dataclass(frozen=True, kw_only=True)
class PoolLayer(InputOutputGrids, OneInputOneOutput, IrLayer):
    """What both pools have: the window, the grids, the clamp."""

    averages: ClassVar[bool] = False  # the window's mean (a division the hardware does by shifting)

    input_channel_num: int
    input_size: Size
    input_grid: Pow2Grid | AffineGrid = grid_field(INPUT_GRID)
    input_dtype: str = written_in("tf2ir", "int8")
    kernel_size: Size
    stride: Size
    padding: Padding
    output_channel_num: int
    output_size: Size
    output_grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)
    output_dtype: str = written_in("tf2ir", "int8")
    dtype: str = written_in("tf2ir", "int8", optional=True)  # seed 000 lists `dtype` for AVGPOOL/MAXPOOL besides input/output_dtype
    # the fused activation's clamp (TF2IR's: the int8 range, saturation)
    output_min: int = written_in("tflite_int8", -128)
    output_max: int = written_in("tflite_int8", 127)

    @property
    def window(self) -> Window:
        return Window.of(self)

    def label(self) -> str:
        kernel, stride = self.kernel_size, self.stride
        return f"{self.label_prefix}{kernel.height}x{kernel.width}" + (f"/{stride.height}" if stride.height > 1 else "")

    def macs(self) -> int:
        return 0


@dataclass(frozen=True, kw_only=True)
class AvgPoolLayer(PoolLayer):
    operation: ClassVar[str] = "avg_pool"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": 'Average pooling.',
             "tflite_int8": ('Average pooling on the tflite_int8 scheme. Without multiplier (AVERAGE_POOL_2D, input and output '
                             'quantized alike): the int32 sum of the window\'s elements inside the image divided by their count, '
                             'rounding half away from zero, clamped to [output_min, output_max]. With multiplier and shift (MEAN over '
                             'the whole image, reference_ops::QuantizedMeanOrSum): the sum less input_zero_point x count, rescaled by '
                             'the multiplier shifted left by h = min(floor(log2(count)), 32, 31 + shift) and divided by count, with '
                             'shift - h, plus output_zero_point, saturated.')},
        since={"tf2ir": None, "tflite_int8": "1.2"},
        fields={"multiplier": {**_INTEGER, "description": "MEAN: input scale / output scale as a Q31 multiplier"},
                "shift": {**_INTEGER, "description": "MEAN: its exponent (TFLite's convention: positive shifts left)"}},
    )
    label_prefix: ClassVar[str] = "avg"
    averages: ClassVar[bool] = True

    input_pre_ls: int | None = written_in("tf2ir", None)  # output_log2scale - input_log2scale: a left shift before the mean
    multiplier: int | None = written_in("tflite_int8", None, omit_default=True)  # MEAN's
    shift: int | None = written_in("tflite_int8", None, omit_default=True)

    @property
    def averaging(self) -> WindowMean | RescaledMean:
        if self.on_pow2_grids:
            return WindowMean(int(self.input_pre_ls), "half_up")
        if self.multiplier is None:
            return WindowMean(0, "half_away")
        return RescaledMean(self.input_grid.zero_point, self.multiplier, self.shift, self.output_grid.zero_point)

    def shifts(self) -> list[Shift]:
        return [Shift("input_pre_ls", self.input_pre_ls)] if self.on_pow2_grids else []

    def accumulator_bound(self, params: dict | None = None) -> int | None:
        # TF2IR: window sums of at most 128 x window << input_pre_ls (emission checks int32)
        return None if self.on_pow2_grids else self.kernel_size.height * self.kernel_size.width * 255

    def fused_operators(self) -> list[str]:
        if self.on_pow2_grids:
            return ["avg_pool", "requantize"]  # the window sum's division is a requantization
        return ["mean", "requantize"] if self.multiplier is not None else ["avg_pool", "clamp"]


@dataclass(frozen=True, kw_only=True)
class MaxPoolLayer(PoolLayer):
    """The window's largest element (padding never chosen), moved from the input's grid to the output's (TF2IR: a
    shift, normally 0; the tflite_int8 dialect's grids are one), clamped to [output_min, output_max]."""

    operation: ClassVar[str] = "max_pool"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": ('Max pooling over the window (padding never chosen), then a shift by input_log2scale - output_log2scale '
                       '(right shifts round half up; normally 0), then saturation.'),
             "tflite_int8": 'Max pooling on the tflite_int8 scheme: the largest element of the window inside the image, clamped.'},
        since={"tf2ir": None, "tflite_int8": "1.2"},
    )
    label_prefix: ClassVar[str] = "max"

    input_pre_ls: int | None = written_in("tf2ir", None, omit_default=True)  # the schema allows it; unused by max_pool

    @property
    def rescale(self) -> int:
        """The right shift (negative: left) from the input's grid to the output's: input_log2scale - output_log2scale."""
        return self.input_grid.log2scale - self.output_grid.log2scale if self.on_pow2_grids else 0

    def shifts(self) -> list[Shift]:
        return [Shift("input_log2scale - output_log2scale", self.rescale, signed=True)] if self.on_pow2_grids else []

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # no accumulator: the window's maximum, then a shift

    def fused_operators(self) -> list[str]:
        return ["max_pool", *(["requantize"] if self.rescale else []), *([] if self.on_pow2_grids else ["clamp"])]
