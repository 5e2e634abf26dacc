"""The geometry of a windowed layer (conv, dwconv, the pools), from its IR record: input and
output sizes, kernel, stride, dilation, padding, and the rows and columns of the padded
input its windows read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.ir.records import Size

NO_DILATION = Size(1, 1)


@dataclass(frozen=True)
class Window:
    height: int
    width: int
    out_height: int
    out_width: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad_top: int
    pad_left: int

    @classmethod
    def of(cls, record: Any) -> "Window":
        """From a record with input_size, output_size, kernel_size, stride, padding (and dilations)."""
        dilation = getattr(record, "dilations", NO_DILATION)
        return cls(record.input_size.height, record.input_size.width, record.output_size.height, record.output_size.width,
                   record.kernel_size.pair(), record.stride.pair(), dilation.pair(), record.padding.top, record.padding.left)

    @property
    def taps(self) -> int:
        return self.kernel[0] * self.kernel[1]

    @property
    def padded_width(self) -> int:
        """Columns of the padded input the windows read (at least the input and its left padding)."""
        return max(self.width + self.pad_left, (self.out_width - 1) * self.stride[1] + (self.kernel[1] - 1) * self.dilation[1] + 1)

    @property
    def padded_height(self) -> int:
        """Rows of the padded input the windows read (at least the input and its top padding)."""
        return max(self.height + self.pad_top, (self.out_height - 1) * self.stride[0] + (self.kernel[0] - 1) * self.dilation[0] + 1)

    def input_rows(self, rows: int) -> int:
        """Padded input rows that `rows` output rows read."""
        return (rows - 1) * self.stride[0] + (self.kernel[0] - 1) * self.dilation[0] + 1

    def tap_offset(self, kh: int, kw: int) -> tuple[int, int]:
        return kh * self.dilation[0], kw * self.dilation[1]
