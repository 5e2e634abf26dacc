"""The add IR record (seed 000, 4.2 ADD): pl + add, each at its own scale, into the output's."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from core.ir.activations import Activated
from core.ir.records import IrLayer, OpSchema, Shift, Size


@dataclass(frozen=True, kw_only=True)
class AddLayer(Activated, IrLayer):
    operation: ClassVar[str] = "add"
    schema: ClassVar[OpSchema] = OpSchema(
        doc='Element-wise sum of two int8 tensors of the same shape.',
        fields={'size': {'type': 'integer', 'minimum': 1, 'description': 'C * H * W'},
                'pl_log2scale': {'type': 'integer', 'description': 'real value = int8 value * 2^-log2scale'},
                'pl_shiftbit': {'type': 'integer', 'description': 'Legacy name of pl_log2scale.'},
                'add_log2scale': {'type': 'integer', 'description': 'real value = int8 value * 2^-log2scale'},
                'add_shiftbit': {'type': 'integer', 'description': 'Legacy name of add_log2scale.'},
                'output_shift_bit': {'type': 'integer',
                                     'description': 'output_log2scale - min(add_log2scale, pl_log2scale): the LEFT '
                                                    'shift from the int32 sum to the output; negative means a right '
                                                    'shift with round half up. Before summing, the operand with the '
                                                    'larger log2scale is shifted right by the difference of the two '
                                                    'log2scales, with round half up.'},
                'pl_name': {'type': 'string', 'description': 'Producer of op.inputs[0] (the augend).'},
                'add_name': {'type': 'string', 'description': 'Producer of op.inputs[1] (the addend).'}},
    )
    label_prefix: ClassVar[str] = "add"
    elementwise: ClassVar[bool] = True

    activation_type: str
    input_channel_num: int
    input_size: Size
    size: int
    dtype: str = "int8"
    pl_log2scale: int
    pl_shiftbit: int
    add_log2scale: int
    add_shiftbit: int
    output_log2scale: int
    output_shift_bit: int
    pl_name: str
    add_name: str

    def operands(self) -> tuple[str, ...]:
        return self.pl_name, self.add_name

    def shape_of_output(self) -> tuple[int, ...]:
        return self.input_size.height, self.input_size.width, self.input_channel_num

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return self.shape_of_output()

    def log2scale_of_input(self, position: int) -> int:
        return self.pl_log2scale if position == 0 else self.add_log2scale

    def log2scale_of_output(self) -> int:
        return self.output_log2scale

    @property
    def coarse_log2scale(self) -> int:
        """The coarser operand scale, which the sum is taken at."""
        return min(self.pl_log2scale, self.add_log2scale)

    def shifts(self) -> list[Shift]:
        # aligning the finer operand, then moving the sum to the output scale
        return [Shift("pl_log2scale - add_log2scale", self.pl_log2scale - self.add_log2scale, signed=True),
                Shift("output_shift_bit", self.output_shift_bit, signed=True)]

    def fused_operators(self) -> list[str]:
        return ["add", "requantize", *self.activation_operators()]

    def macs(self) -> int:
        return 0

    def with_lanes(self, channels: int) -> "AddLayer":
        height, width = self.input_size.pair()
        return dataclasses.replace(self, input_channel_num=channels, size=height * width * channels)

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # no accumulator: |sum| <= 256 at the coarser scale, then a shift

