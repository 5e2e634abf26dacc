"""The mul IR record, of both dialects: input0 * input1, element-wise with NumPy broadcasting of one image's shapes.
TF2IR's (an extension): the int32 product moved to the output scale by one rounding shift. The tflite_int8 dialect's
(1.2): reference_integer_ops::Mul, a constant second factor allowed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.ir.activations import Activated, activation_named
from core.ir.fixedpoint import INT8_PRODUCT_MAX, rounding_constant
from core.ir.fields import shape_array
from core.ir.records import OUTPUT_GRID, GridsKeys, IrLayer, OpSchema, OperandGrids, Shift, grid_field, written_in
from core.ir.rescale import MultiplierRescale, Rescale, ShiftRescale
from core.quantize.grid import AffineGrid, Pow2Grid

_PAIR = {"type": "array", "minItems": 2, "maxItems": 2}


@dataclass(frozen=True)
class MulRequantization:
    """The numbers of a mul's arithmetic (kernel.py: mul_arithmetic): each factor's zero point, the product's rescale to
    the output, the output zero point and the clamp of the fused activation."""

    input_zero_points: tuple[int, ...]
    rescale: Rescale
    output_zero_point: int
    clamp: tuple[int, int]


def shift_requantization(input_log2scales, output_log2scale: int, activation: str) -> MulRequantization:
    """TF2IR's: the product (at the sum of the factors' log2scales) shifted to the output's, zero points 0, the
    activation's clamp."""
    return MulRequantization((0,) * len(input_log2scales), ShiftRescale(sum(input_log2scales) - output_log2scale), 0,
                             activation_named(activation).clamp(output_log2scale))


@dataclass(frozen=True, kw_only=True)
class MulLayer(OperandGrids, Activated, IrLayer):
    operation: ClassVar[str] = "mul"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": ("Element-wise product of two int8 inputs with NumPy broadcasting of one image's shapes (an extension): "
                       'the int32 product (|p| <= 2^14) shifted by output_shift = input0_log2scale + input1_log2scale - '
                       'output_log2scale (right with round half up, or exactly left when negative), clamped by the activation, '
                       'saturated to int8. One rounding.'),
             "tflite_int8": ('Element-wise product on the tflite_int8 scheme (reference_integer_ops::Mul, broadcasting): (q0 - z0) x '
                             '(q1 - z1) rescaled by multiplier and shift (rounding twice), plus output_zero_point, clamped to '
                             '[output_min, output_max]. The operands are previous_layer in order; with load_constant, the second factor is '
                             'params/<name>_constant.npy (int8, or int16 in the 16x8 mode, its shape input_shapes[1], broadcast).')},
        since={"tf2ir": "1.1", "tflite_int8": "1.2"},
        fields={'input0_shape': {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}, 'minItems': 1},
                'input1_shape': {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}, 'minItems': 1},
                'output_shape': {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}, 'minItems': 1},
                'output_shift': {'type': 'integer'},
                'input0_name': {'type': 'string', 'minLength': 1},
                'input1_name': {'type': 'string', 'minLength': 1},
                "shape": shape_array("One image's output shape."),
                "input_shapes": {**_PAIR, "items": shape_array(), "description": "Each input's shape, broadcasting to `shape`."},
                "input_scales": {**_PAIR, "items": {"type": "number", "exclusiveMinimum": 0}},
                "input_zero_points": {**_PAIR, "items": {"type": "integer", "minimum": -128, "maximum": 127}},
                "multiplier": {"type": "integer", "description": "input_scale0 x input_scale1 / output_scale, Q31"},
                "shift": {"type": "integer", "description": "TFLite's convention: positive shifts left."},
                "load_constant": {"type": "boolean", "description": "Whether the second factor is a constant."}},
    )
    label_prefix: ClassVar[str] = "mul"

    input_grids: tuple[Pow2Grid | AffineGrid, ...] = grid_field(GridsKeys(("input0_log2scale", "input1_log2scale")))
    output_grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)
    # TF2IR's
    activation_type: str = written_in("tf2ir", "None")
    input0_shape: tuple[int, ...] = written_in("tf2ir", ())  # one image's; each input broadcasts to output_shape
    input1_shape: tuple[int, ...] = written_in("tf2ir", ())
    output_shape: tuple[int, ...] = written_in("tf2ir", ())
    output_shift: int | None = written_in("tf2ir", None)  # input0_log2scale + input1_log2scale - output_log2scale
    input0_name: str | None = written_in("tf2ir", None)
    input1_name: str | None = written_in("tf2ir", None)
    dtype: str = written_in("tf2ir", "int8")
    # the tflite_int8 dialect's: TFLite's requantization, the fused activation's clamp, a constant second factor
    shape: tuple[int, ...] = written_in("tflite_int8", ())
    input_shapes: tuple[tuple[int, ...], ...] = written_in("tflite_int8", ())
    multiplier: int | None = written_in("tflite_int8", None)
    shift: int | None = written_in("tflite_int8", None)
    output_min: int = written_in("tflite_int8", -128)
    output_max: int = written_in("tflite_int8", 127)
    load_constant: bool = written_in("tflite_int8", False)

    def shape_of_output(self) -> tuple[int, ...]:
        return tuple(self.output_shape if self.on_pow2_grids else self.shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        if self.on_pow2_grids:
            return tuple(self.input0_shape if position == 0 else self.input1_shape)
        return tuple(self.input_shapes[position])

    def macs(self) -> int:
        return math.prod(self.shape_of_output())

    @property
    def requantization(self) -> MulRequantization:
        if self.on_pow2_grids:
            return shift_requantization([self.log2scale_of_input(position) for position in range(2)], self.log2scale_of_output(),
                                        self.activation_type)
        return MulRequantization(tuple(grid.zero_point for grid in self.input_grids), MultiplierRescale(self.multiplier, self.shift),
                                 self.output_grid.zero_point, (self.output_min, self.output_max))

    def shifts(self) -> list[Shift]:
        return [Shift("output_shift", self.output_shift, signed=True)] if self.on_pow2_grids else []

    def accumulator_bound(self, params: dict | None = None) -> int:
        if self.on_pow2_grids:
            return INT8_PRODUCT_MAX + rounding_constant(self.output_shift)
        return 256 * 256 if self.activation_bits == 8 else 2**30  # (q - z) of int8s; int16s, whose zero point is 0

    def fused_operators(self) -> list[str]:
        return ["mul", "requantize", *(self.activation_operators() if self.on_pow2_grids else ["clamp"])]

    def broadcast(self, position: int, batch: np.ndarray) -> np.ndarray:
        """A batch of input `position` broadcast to [N, *output_shape]."""
        output_shape = self.shape_of_output()
        shape = (1,) * (len(output_shape) - len(self.shape_of_input(position))) + self.shape_of_input(position)
        return np.broadcast_to(batch.reshape(len(batch), *shape), (len(batch), *output_shape))
