"""The constant IR record, of both dialects: params `values` (int8, int16 in TFLite's 16x8 mode) of one image's output
shape, on the output's grid, the same for every image of its input's batch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.fields import shape_array
from core.ir.records import INPUT_GRID, OUTPUT_GRID, Copy, InputOutputGrids, InputOutputShape, IrLayer, OpSchema, grid_field
from core.quantize.grid import AffineGrid, Pow2Grid


@dataclass(frozen=True, kw_only=True)
class ConstantLayer(Copy, InputOutputGrids, InputOutputShape, IrLayer):
    operation: ClassVar[str] = "constant"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": "A fixed tensor (an extension; a ViT's class token or position embedding): params values int8 [output_shape] at "
                      "output_log2scale, copied to every image of the input's batch; the input's values are not read.",
             "tflite_int8": "A constant operand of an operator (ADD, CONCATENATION) on the tflite_int8 scheme: params values int8 (int16 at "
                            "16 bits) [output_shape] at the output's scale and zero point, copied to every image of the input's batch."},
        since={"tf2ir": "1.5", "tflite_int8": "1.5"},
        fields={"input_shape": shape_array("One image of the input, whose batch it takes."),
                "output_shape": shape_array("One image of the values.")},
    )
    label_prefix: ClassVar[str] = "const"

    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    input_grid: Pow2Grid | AffineGrid = grid_field(INPUT_GRID)
    output_grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)

    def fused_operators(self) -> list[str]:
        return ["constant"]
