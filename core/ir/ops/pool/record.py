"""The avg_pool and max_pool IR records (seed 000, 4.2 AVGPOOL/MAXPOOL)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.records import IrLayer, OneInputOneOutput, OpSchema, Padding, Shift, Size, omitted_when, optional
from core.ir.window import Window


@dataclass(frozen=True, kw_only=True)
class PoolLayer(OneInputOneOutput, IrLayer):
    """What both pools have: a window over each channel, an input and an output scale."""

    averages: ClassVar[bool] = False  # the window's mean (a division the hardware does by shifting)

    input_channel_num: int
    input_size: Size
    input_log2scale: int
    input_dtype: str = "int8"
    kernel_size: Size
    stride: Size
    padding: Padding
    output_channel_num: int
    output_size: Size
    output_log2scale: int
    output_dtype: str = "int8"
    dtype: str = optional("int8")  # seed 000 lists `dtype` for AVGPOOL/MAXPOOL besides input/output_dtype

    @property
    def window(self) -> Window:
        return Window.of(self)

    def label(self) -> str:
        kernel, stride = self.kernel_size, self.stride
        return f"{self.label_prefix}{kernel.height}x{kernel.width}" + (f"/{stride.height}" if stride.height > 1 else "")

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # no accumulator: window sums of at most 128 x window << input_pre_ls (emission checks int32)



@dataclass(frozen=True, kw_only=True)
class AvgPoolLayer(PoolLayer):
    operation: ClassVar[str] = "avg_pool"
    schema: ClassVar[OpSchema] = OpSchema(
        doc='Average pooling.',
    )
    label_prefix: ClassVar[str] = "avg"
    averages: ClassVar[bool] = True

    input_pre_ls: int  # output_log2scale - input_log2scale: a left shift before the mean

    def shifts(self) -> list[Shift]:
        return [Shift("input_pre_ls", self.input_pre_ls)]

    def fused_operators(self) -> list[str]:
        return ["avg_pool", "requantize"]  # the window sum's division is a requantization


@dataclass(frozen=True, kw_only=True)
class MaxPoolLayer(PoolLayer):
    operation: ClassVar[str] = "max_pool"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Max pooling over the window (padding never chosen), then a shift by input_log2scale - output_log2scale '
             '(right shifts round half up; normally 0), then saturation.'),
    )
    label_prefix: ClassVar[str] = "max"

    input_pre_ls: int | None = omitted_when(None)  # the schema allows it; unused by max_pool

    @property
    def rescale(self) -> int:
        """input_log2scale - output_log2scale: the right shift (negative: left) to the output scale."""
        return self.input_log2scale - self.output_log2scale

    def shifts(self) -> list[Shift]:
        return [Shift("input_log2scale - output_log2scale", self.rescale, signed=True)]

    def fused_operators(self) -> list[str]:
        return ["max_pool", *(["requantize"] if self.rescale else [])]
