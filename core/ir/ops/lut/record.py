"""The lut IR record (a TF2IR extension): y = table[x + 128] element by element, the table being
the region's float function evaluated at every int8 input and rounded to the output scale."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from core.ir.records import IrLayer, OpSchema, SameShapeInput, Shift

TABLE_SIZE = 256  # one entry per int8 input, x = -128 .. 127 at index x + 128


@dataclass(frozen=True, kw_only=True)
class LutLayer(SameShapeInput, IrLayer):
    operation: ClassVar[str] = "lut"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('An element-wise int8 -> int8 function as a 256-entry table (an extension): y = table[x + 128], the '
             'table in params/<name>_table.npy (int8[256]). table[q + 128] is the function of q * 2^-input_log2scale '
             "(TensorFlow's float32 ops, `function`) rounded half up at 2^-output_log2scale and saturated, as "
             'FakeQuantWithMinMaxVars rounds. No other rounding.'),
        since='1.1',
        fields={'function': {'type': 'string',
                             'description': "The graph's element-wise ops the table stands for (x: the input)."},
                'shape': {'type': 'array',
                          'items': {'type': 'integer', 'minimum': 1},
                          'minItems': 1,
                          'description': "One image's input and output shape."}},
    )
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
