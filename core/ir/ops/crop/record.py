"""The crop IR record (TF2IR 1.2): Keras' Cropping2D, a StridedSlice of height and width by constant amounts; the
output shares the input's log2scale (it moves no value)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.records import IrLayer, OneInputOneOutput, OpSchema, Padding, ScaleSharingCopy, Size


@dataclass(frozen=True, kw_only=True)
class CropLayer(ScaleSharingCopy, OneInputOneOutput, IrLayer):
    operation: ClassVar[str] = "crop"
    label_prefix: ClassVar[str] = "crop"
    schema: ClassVar[OpSchema] = OpSchema(
        doc='Spatial cropping (Cropping2D): `crop` rows and columns removed from each side of the input.',
        since="1.2",
        fields={'crop': {'description': 'Rows (top, bottom) and columns (left, right) removed.'},
                'log2scale': {'type': 'integer', 'description': 'Shared by input and output: cropping moves no value.'}},
    )

    input_size: Size
    input_channel_num: int
    crop: Padding
    output_size: Size
    output_channel_num: int
    log2scale: int

    def fused_operators(self) -> list[str]:
        return ["crop"]
