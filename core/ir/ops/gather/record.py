"""The gather IR record, of both dialects: each integer id of the network input (a text model's token ids, read as
they are, never quantized) replaced by its row of the table (params `table`, int8 [vocabulary, depth]; int16 in
TFLite's 16x8 mode), quantized on the output's grid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.fields import shape_array
from core.ir.records import OUTPUT_GRID, AnyDialect, Copy, InputOutputShape, IrError, IrLayer, OpSchema, grid_field
from core.quantize.grid import AffineGrid, IndexGrid, Pow2Grid


@dataclass(frozen=True, kw_only=True)
class GatherLayer(Copy, AnyDialect, InputOutputShape, IrLayer):
    operation: ClassVar[str] = "gather"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": "Lookup of the table's rows by int32 ids (an extension; Keras' Embedding): output [.., depth] is the row "
                      "of each id, at output_log2scale; the ids are not quantized.",
             "tflite_int8": "GATHER on the tflite_int8 scheme: params int8 (int16 at 16 bits) [vocabulary, depth] quantized as the output, indices "
                            "int32 (the network's token ids)."},
        since={"tf2ir": "1.4", "tflite_int8": "1.4"},
        fields={"vocabulary": {"type": "integer", "minimum": 1, "description": "The table's rows: every id is in [0, vocabulary)."},
                "input_shape": shape_array("One sample's ids (int32)."),
                "output_shape": shape_array("One sample's output: the ids' shape, then the table's depth.")},
    )
    label_prefix: ClassVar[str] = "gather"

    vocabulary: int
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    output_grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)

    def __post_init__(self):
        if tuple(self.output_shape[:-1]) != tuple(self.input_shape) or self.vocabulary < 1:
            raise IrError(f"layer {self.name} (gather): ids of {list(self.input_shape)} give {list(self.input_shape)} + [depth], "
                          f"not {list(self.output_shape)}")

    @property
    def depth(self) -> int:
        return int(self.output_shape[-1])

    def grid_of_input(self, position: int) -> IndexGrid:
        return IndexGrid(self.vocabulary)

    def grid_of_output(self) -> Pow2Grid | AffineGrid:
        return self.output_grid

    def fused_operators(self) -> list[str]:
        return ["gather"]
