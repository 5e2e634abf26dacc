"""The transpose IR record, of both dialects: output axis k is input axis permutation[k] of one image (the batch axis
stays first), the same values on the same grid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.fields import shape_array
from core.ir.records import InputOutputShape, IrError, IrLayer, OpSchema, SharedGrid, grid_field
from core.quantize.grid import AffineGrid, Pow2Grid


@dataclass(frozen=True, kw_only=True)
class TransposeLayer(SharedGrid, InputOutputShape, IrLayer):
    operation: ClassVar[str] = "transpose"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": "Permutation of each image's axes (an extension): output axis k is input axis permutation[k]; no arithmetic.",
             "tflite_int8": "TRANSPOSE on the tflite_int8 scheme: each image's axes permuted, input and output quantized alike."},
        since={"tf2ir": "1.3", "tflite_int8": "1.3"},
        fields={"permutation": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1,
                                "description": "Output axis k is input axis permutation[k], axes of one image (the batch axis excluded)."},
                "input_shape": shape_array("One image's input shape."),
                "output_shape": shape_array("One image's output shape."),
                "log2scale": {"type": "integer", "description": "Shared by input and output: a transpose moves no value."}},
    )
    label_prefix: ClassVar[str] = "tr"

    permutation: tuple[int, ...]
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    grid: Pow2Grid | AffineGrid = grid_field()  # the input's and the output's: a transpose moves no value

    def __post_init__(self):
        if sorted(self.permutation) != list(range(len(self.input_shape))) or \
                tuple(self.input_shape[axis] for axis in self.permutation) != tuple(self.output_shape):
            raise IrError(f"layer {self.name} (transpose): permutation {list(self.permutation)} of {list(self.input_shape)} does not "
                          f"give {list(self.output_shape)}")

    def fused_operators(self) -> list[str]:
        return ["transpose"]
