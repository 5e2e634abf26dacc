"""The concat2 IR record (seed 000 ConcatV2): two NHWC inputs, each moved to the output's
scale, joined along H, W or C."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.records import IrLayer, Shift, Size

DIM_AXES = {"H": 1, "W": 2, "C": 3}  # the NHWC axis of each `dim`


@dataclass(frozen=True, kw_only=True)
class Concat2Layer(IrLayer):
    operation: ClassVar[str] = "concat2"
    label_prefix: ClassVar[str] = "cat"

    dim: str
    output_channel_num: int
    output_size: Size
    output_log2scale: int
    output_dtype: str = "int8"
    input0_channel_num: int
    input0_size: Size
    input0_log2scale: int
    input0_dtype: str = "int8"
    input1_channel_num: int
    input1_size: Size
    input1_log2scale: int
    input1_dtype: str = "int8"

    def shape_of_output(self) -> tuple[int, ...]:
        return self.output_size.height, self.output_size.width, self.output_channel_num

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        size: Size = getattr(self, f"input{position}_size")
        return size.height, size.width, getattr(self, f"input{position}_channel_num")

    def log2scale_of_input(self, position: int) -> int:
        return getattr(self, f"input{position}_log2scale")

    def log2scale_of_output(self) -> int:
        return self.output_log2scale

    def rescale(self, position: int) -> int:
        """input_k_log2scale - output_log2scale: the right shift (negative: left) moving input k to the output scale."""
        return self.log2scale_of_input(position) - self.output_log2scale

    def shifts(self) -> list[Shift]:
        return [Shift(f"input{k}_log2scale - output_log2scale", self.rescale(k), signed=True) for k in (0, 1)]

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # no accumulator: each element moved by one shift

    def fused_operators(self) -> list[str]:
        return ["concat2", "requantize"]

