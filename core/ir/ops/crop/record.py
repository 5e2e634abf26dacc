"""The crop IR record (TF2IR 1.2; the tflite_int8 dialect's since 1.3), of both dialects: Keras' Cropping2D (and a
recurrent layer's time step of a sequence held as an image), a StridedSlice of height and width by constant amounts;
the output shares the input's grid (it moves no value)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.records import IrLayer, OneInputOneOutput, OpSchema, Padding, SharedGrid, Size, grid_field
from core.quantize.grid import AffineGrid, Pow2Grid


@dataclass(frozen=True, kw_only=True)
class CropLayer(SharedGrid, OneInputOneOutput, IrLayer):
    operation: ClassVar[str] = "crop"
    label_prefix: ClassVar[str] = "crop"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": "Spatial cropping (Cropping2D): `crop` rows and columns removed from each side of the input.",
             "tflite_int8": "STRIDED_SLICE of height and width on the tflite_int8 scheme (stride 1): `crop` rows and columns "
                            "removed from each side, input and output quantized alike."},
        since={"tf2ir": "1.2", "tflite_int8": "1.3"},
        fields={'crop': {'description': 'Rows (top, bottom) and columns (left, right) removed.'},
                'log2scale': {'type': 'integer', 'description': 'Shared by input and output: cropping moves no value.'}},
    )

    input_size: Size
    input_channel_num: int
    crop: Padding
    output_size: Size
    output_channel_num: int
    grid: Pow2Grid | AffineGrid = grid_field()  # the input's and the output's: cropping moves no value

    def fused_operators(self) -> list[str]:
        return ["crop"]
