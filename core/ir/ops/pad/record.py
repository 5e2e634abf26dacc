"""The pad IR record (TF2IR 1.2), of both dialects: TF2IR's, a TensorFlow Pad of height and width by zeros that no
conv reads as its own padding (Keras' ZeroPadding2D before a pooling layer), where zero is an int8 0 at any
power-of-two scale; the tflite_int8 dialect's, a .tflite's PAD by the zero point. The output shares the input's
grid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.records import IrLayer, OneInputOneOutput, OpSchema, Padding, SharedGrid, Size, grid_field
from core.quantize.grid import AffineGrid, Pow2Grid


@dataclass(frozen=True, kw_only=True)
class PadLayer(SharedGrid, OneInputOneOutput, IrLayer):
    operation: ClassVar[str] = "pad"
    label_prefix: ClassVar[str] = "pad"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": "Spatial zero padding: the input surrounded by `padding` rows and columns of 0 (a Pad no conv absorbs).",
             "tflite_int8": "Spatial padding on the tflite_int8 scheme: the input surrounded by `padding` rows and columns of "
                            "output_zero_point."},
        since="1.2",
        fields={'log2scale': {'type': 'integer', 'description': 'Shared by input and output: padding moves no value.'}},
    )

    input_size: Size
    input_channel_num: int
    padding: Padding
    output_size: Size
    output_channel_num: int
    grid: Pow2Grid | AffineGrid = grid_field()  # the input's and the output's: padding moves no value

    def fused_operators(self) -> list[str]:
        return ["pad"]
