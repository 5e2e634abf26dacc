"""The mul IR record (a TF2IR extension): input0 * input1, element-wise with NumPy broadcasting
of one image's shapes, the int32 product moved to the output scale by one rounding shift."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.ir.activations import Activated
from core.ir.fixedpoint import INT8_PRODUCT_MAX, rounding_constant
from core.ir.records import IrLayer, OpSchema, Shift


def broadcast_strides(shape: tuple[int, ...], output_shape: tuple[int, ...]) -> list[int]:
    """Per output axis, the step in `shape`'s row-major data (0 along a broadcast axis); `shape`
    is aligned to the output's last axes, as NumPy and TensorFlow broadcast."""
    padded = (1,) * (len(output_shape) - len(shape)) + tuple(shape)
    strides, step = [], 1
    for size, out in reversed(list(zip(padded, output_shape))):
        strides.append(0 if size == 1 and out != 1 else step)
        step *= size
    return strides[::-1]


@dataclass(frozen=True, kw_only=True)
class MulLayer(Activated, IrLayer):
    operation: ClassVar[str] = "mul"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=("Element-wise product of two int8 inputs with NumPy broadcasting of one image's shapes (an extension): "
             'the int32 product (|p| <= 2^14) shifted by output_shift = input0_log2scale + input1_log2scale - '
             'output_log2scale (right with round half up, or exactly left when negative), clamped by the activation, '
             'saturated to int8. One rounding.'),
        since='1.1',
        fields={'input0_shape': {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}, 'minItems': 1},
                'input1_shape': {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}, 'minItems': 1},
                'output_shape': {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}, 'minItems': 1},
                'output_shift': {'type': 'integer'},
                'input0_name': {'type': 'string', 'minLength': 1},
                'input1_name': {'type': 'string', 'minLength': 1}},
    )
    label_prefix: ClassVar[str] = "mul"

    activation_type: str
    input0_shape: tuple[int, ...]  # one image's; each input broadcasts to output_shape
    input1_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    input0_log2scale: int
    input1_log2scale: int
    output_log2scale: int
    output_shift: int  # input0_log2scale + input1_log2scale - output_log2scale
    input0_name: str
    input1_name: str
    dtype: str = "int8"

    def operands(self) -> tuple[str, ...]:
        return self.input0_name, self.input1_name

    def shape_of_output(self) -> tuple[int, ...]:
        return tuple(self.output_shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return tuple(self.input0_shape if position == 0 else self.input1_shape)

    def log2scale_of_input(self, position: int) -> int:
        return self.input0_log2scale if position == 0 else self.input1_log2scale

    def log2scale_of_output(self) -> int:
        return self.output_log2scale

    def macs(self) -> int:
        return math.prod(self.output_shape)

    def shifts(self) -> list[Shift]:
        return [Shift("output_shift", self.output_shift, signed=True)]

    def accumulator_bound(self, params: dict | None = None) -> int:
        return INT8_PRODUCT_MAX + rounding_constant(self.output_shift)

    def fused_operators(self) -> list[str]:
        return ["mul", "requantize", *self.activation_operators()]

    def strides(self, position: int) -> list[int]:
        return broadcast_strides(self.shape_of_input(position), self.shape_of_output())

    def broadcast(self, position: int, batch: np.ndarray) -> np.ndarray:
        """A batch of input `position` broadcast to [N, *output_shape]."""
        shape = (1,) * (len(self.output_shape) - len(self.shape_of_input(position))) + self.shape_of_input(position)
        return np.broadcast_to(batch.reshape(len(batch), *shape), (len(batch), *self.output_shape))
