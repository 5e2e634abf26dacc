"""The lut IR record (a TF2IR extension): y = table[x + 128] element by element, the table being
the region's float function evaluated at every int8 input and rounded to the output scale."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from core.ir.records import IrLayer, SameShapeInput, Shift

TABLE_SIZE = 256  # one entry per int8 input, x = -128 .. 127 at index x + 128


@dataclass(frozen=True, kw_only=True)
class LutLayer(SameShapeInput, IrLayer):
    operation: ClassVar[str] = "lut"
    label_prefix: ClassVar[str] = "lut"
    elementwise: ClassVar[bool] = True

    function: str  # the graph's element-wise ops the table stands for, x being the input
    shape: tuple[int, ...]  # one image's input (and output) shape
    input_log2scale: int
    output_log2scale: int
    dtype: str = "int8"

    def macs(self) -> int:
        return 0

    def shifts(self) -> list[Shift]:
        return []  # the scales are in the table

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # no arithmetic: a table read

    def fused_operators(self) -> list[str]:
        return ["lookup_table"]

    def with_lanes(self, channels: int) -> "LutLayer":
        return dataclasses.replace(self, shape=(*self.shape[:-1], channels))
