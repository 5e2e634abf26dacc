"""The batch_matmul IR record, of both dialects: the matrix product of two activations over their last two axes, the
axes before them batches broadcast as NumPy does (a multi-head attention's scores q k^T and its context p v, per head).
TF2IR's (an extension): the int32 sums moved to the output scale by one rounding shift. The tflite_int8 dialect's:
TFLite's BATCH_MATMUL (reference_ops::BatchMatMul), both operands' zero points subtracted, rescaled by a multiplier
and a shift."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.ir.fields import shape_array
from core.ir.fixedpoint import INT8_PRODUCT_MAX, rounding_constant
from core.ir.records import OUTPUT_GRID, GridsKeys, IrError, IrLayer, OpSchema, OperandGrids, Shift, grid_field, written_in
from core.quantize.grid import AffineGrid, Pow2Grid

_PAIR = {"type": "array", "minItems": 2, "maxItems": 2}


def product_shape(first: tuple[int, ...], second: tuple[int, ...], adj_x: bool, adj_y: bool) -> tuple[tuple[int, ...], int] | None:
    """(the output shape, the depth K summed over) of first @ second, each transposed in its last two axes where its adj
    flag says, the batch axes broadcast; None where the shapes do not multiply."""
    if len(first) < 2 or len(second) < 2:
        return None
    (rows, depth), (depth_second, columns) = first[-2:][::-1] if adj_x else first[-2:], second[-2:][::-1] if adj_y else second[-2:]
    if depth != depth_second:
        return None
    try:
        batch = np.broadcast_shapes(tuple(first[:-2]), tuple(second[:-2]))
    except ValueError:
        return None
    return (*batch, rows, columns), depth


@dataclass(frozen=True, kw_only=True)
class BatchMatMulLayer(OperandGrids, IrLayer):
    operation: ClassVar[str] = "batch_matmul"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": ("Matrix product of two int8 activations over their last two axes, each transposed there where adj_x / "
                       "adj_y says, the other axes batches broadcast as NumPy does (an extension): the int32 sums (|s| <= K x "
                       "2^14) shifted by output_shift = input0_log2scale + input1_log2scale - output_log2scale (right with round "
                       "half up, or exactly left when negative), saturated to int8. One rounding."),
             "tflite_int8": ("BATCH_MATMUL on the tflite_int8 scheme (reference_ops::BatchMatMul): sum over k of (x - z0)(y - z1), "
                             "rescaled by multiplier and shift (rounding twice), plus output_zero_point, clamped to [output_min, "
                             "output_max]. The operands are previous_layer in order.")},
        since={"tf2ir": "1.3", "tflite_int8": "1.3"},
        fields={"input_shapes": {**_PAIR, "items": shape_array(), "description": "Each operand's shape (one image's), rank 2 or more."},
                "output_shape": shape_array("One image's output shape: the broadcast batch axes, then rows and columns."),
                "adj_x": {"type": "boolean", "description": "The first operand is transposed in its last two axes."},
                "adj_y": {"type": "boolean", "description": "The second operand is transposed in its last two axes."},
                "output_shift": {"type": "integer"},
                "input0_name": {"type": "string", "minLength": 1},
                "input1_name": {"type": "string", "minLength": 1},
                "input_scales": {**_PAIR, "items": {"type": "number", "exclusiveMinimum": 0}},
                "input_zero_points": {**_PAIR, "items": {"type": "integer", "minimum": -128, "maximum": 127}},
                "multiplier": {"type": "integer", "description": "input_scale0 x input_scale1 / output_scale, Q31"},
                "shift": {"type": "integer", "description": "TFLite's convention: positive shifts left."}},
    )
    label_prefix: ClassVar[str] = "bmm"

    input_grids: tuple[Pow2Grid | AffineGrid, ...] = grid_field(GridsKeys(("input0_log2scale", "input1_log2scale")))
    output_grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)
    input_shapes: tuple[tuple[int, ...], ...]
    output_shape: tuple[int, ...]
    adj_x: bool = False
    adj_y: bool = False
    # TF2IR's: the operands by producer (OperandGrids.operands), one shift
    input0_name: str | None = written_in("tf2ir", None)
    input1_name: str | None = written_in("tf2ir", None)
    output_shift: int | None = written_in("tf2ir", None)
    # the tflite_int8 dialect's: TFLite's requantization and clamp
    multiplier: int | None = written_in("tflite_int8", None)
    shift: int | None = written_in("tflite_int8", None)
    output_min: int = written_in("tflite_int8", -128)
    output_max: int = written_in("tflite_int8", 127)

    def __post_init__(self):
        product = product_shape(*self.input_shapes, self.adj_x, self.adj_y) if len(self.input_shapes) == 2 else None
        if product is None or tuple(product[0]) != tuple(self.output_shape):
            raise IrError(f"layer {self.name} (batch_matmul): operands {[list(shape) for shape in self.input_shapes]} (adj_x "
                          f"{self.adj_x}, adj_y {self.adj_y}) do not multiply to {list(self.output_shape)}")

    @property
    def depth(self) -> int:
        """K, the length of each sum."""
        return product_shape(*self.input_shapes, self.adj_x, self.adj_y)[1]

    def shape_of_output(self) -> tuple[int, ...]:
        return tuple(self.output_shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return tuple(self.input_shapes[position])

    def macs(self) -> int:
        return math.prod(self.output_shape) * self.depth

    def shifts(self) -> list[Shift]:
        return [Shift("output_shift", self.output_shift, signed=True)] if self.on_pow2_grids else []

    def accumulator_bound(self, params: dict | None = None) -> int:
        if self.on_pow2_grids:
            return self.depth * INT8_PRODUCT_MAX + rounding_constant(self.output_shift)
        return self.depth * 256 * 256

    def fused_operators(self) -> list[str]:
        return ["batch_matmul", "requantize", *([] if self.on_pow2_grids else ["clamp"])]
