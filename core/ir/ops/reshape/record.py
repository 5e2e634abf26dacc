"""The reshape IR record (seed 000 RESHAPE): the same bytes, another shape, the same scale."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.records import IrLayer, OpSchema, ScaleSharingCopy


@dataclass(frozen=True, kw_only=True)
class ReshapeLayer(ScaleSharingCopy, IrLayer):
    operation: ClassVar[str] = "reshape"
    schema: ClassVar[OpSchema] = OpSchema(
        doc="Reshape of each image's HWC data in C order.",
        fields={'reshape_param': {'type': 'array',
                                  'items': {'type': 'integer'},
                                  'description': 'The TensorFlow shape without its batch dimension.'},
                'input_shape': {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}},
                'output_shape': {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}},
                'log2scale': {'type': 'integer',
                              'description': 'Shared by input and output: a reshape moves no value.'}},
    )
    label_prefix: ClassVar[str] = "rshp"

    reshape_param: tuple[int, ...]
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    dtype: str = "int8"
    log2scale: int

    def shape_of_output(self) -> tuple[int, ...]:
        return tuple(self.output_shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return tuple(self.input_shape)

    def fused_operators(self) -> list[str]:
        return ["reshape"]

