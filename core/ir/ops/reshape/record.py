"""The reshape IR record (seed 000 RESHAPE; the tflite_int8 dialect's since 1.2): the same bytes, another shape,
the same grid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.fields import shape_array
from core.ir.records import InputOutputShape, IrLayer, OpSchema, SharedGrid, grid_field, written_in
from core.quantize.grid import AffineGrid, Pow2Grid


@dataclass(frozen=True, kw_only=True)
class ReshapeLayer(SharedGrid, InputOutputShape, IrLayer):
    operation: ClassVar[str] = "reshape"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": "Reshape of each image's HWC data in C order.",
             "tflite_int8": "Reshape on the tflite_int8 scheme: each image's bytes in C order, input and output quantized alike."},
        since={"tf2ir": None, "tflite_int8": "1.2"},
        fields={'reshape_param': {'type': 'array',
                                  'items': {'type': 'integer'},
                                  'description': 'The TensorFlow shape without its batch dimension.'},
                'input_shape': {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}},
                'output_shape': {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}},
                'log2scale': {'type': 'integer',
                              'description': 'Shared by input and output: a reshape moves no value.'}},
        fields_in={"tflite_int8": {"input_shape": shape_array("One image's input shape."),
                                   "output_shape": shape_array("One image's output shape.")}},
    )
    label_prefix: ClassVar[str] = "rshp"

    # seed 000's: the graph's shape constant as the original tool wrote it
    reshape_param: tuple[int, ...] = written_in("tf2ir", ())
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    dtype: str = written_in("tf2ir", "int8")
    grid: Pow2Grid | AffineGrid = grid_field()  # the input's and the output's: a reshape moves no value

    def fused_operators(self) -> list[str]:
        return ["reshape"]
