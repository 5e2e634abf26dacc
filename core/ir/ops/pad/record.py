"""The pad IR record (TF2IR 1.2): a TensorFlow Pad of height and width by zeros that no conv reads as its own
padding (Keras' ZeroPadding2D before a pooling layer); zero is an int8 0 at any power-of-two scale, so the
output shares the input's log2scale."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.records import IrLayer, OneInputOneOutput, OpSchema, Padding, ScaleSharingCopy, Size


@dataclass(frozen=True, kw_only=True)
class PadLayer(ScaleSharingCopy, OneInputOneOutput, IrLayer):
    operation: ClassVar[str] = "pad"
    label_prefix: ClassVar[str] = "pad"
    schema: ClassVar[OpSchema] = OpSchema(
        doc='Spatial zero padding: the input surrounded by `padding` rows and columns of 0 (a Pad no conv absorbs).',
        since="1.2",
        fields={'log2scale': {'type': 'integer', 'description': 'Shared by input and output: padding moves no value.'}},
    )

    input_size: Size
    input_channel_num: int
    padding: Padding
    output_size: Size
    output_channel_num: int
    log2scale: int

    def fused_operators(self) -> list[str]:
        return ["pad"]
