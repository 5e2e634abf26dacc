"""The softmax IR record (a TF2IR extension): int8 in, int8 out over the last axis, in integer
arithmetic only -- an exp table, a sum and one rounded division -- so every backend computes
the same bits. The table depends on input_log2scale only: every consumer derives it here."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.ir.records import IrLayer, OpSchema, SameShapeInput, Shift

EXP_BITS = 16  # exp_table's fractional bits: exp(0) = 2^16
EXP_TABLE_SIZE = 256  # max - x of two int8 values: 0 .. 255
MAX_CLASSES = (2**31 - 1) // 2**EXP_BITS  # the sum of the exps stays an int32


def exp_table(input_log2scale: int) -> np.ndarray:
    """int32[256]: e[d] = floor(2^16 * exp(-d * 2^-input_log2scale) + 1/2), d = max - x."""
    d = np.arange(EXP_TABLE_SIZE, dtype=np.float64)
    return np.floor(np.exp(-d * 2.0**-input_log2scale) * 2.0**EXP_BITS + 0.5).astype(np.int32)


@dataclass(frozen=True, kw_only=True)
class SoftmaxLayer(SameShapeInput, IrLayer):
    operation: ClassVar[str] = "softmax"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Softmax over the last axis in integers (an extension): d = max(x) - x in [0, 255]; e = floor(2^16 * '
             'exp(-d * 2^-input_log2scale) + 1/2) (a 256-entry table of input_log2scale); s = sum(e); y = floor((e * '
             '2^(output_log2scale + 1) + s) / (2 s)) in 64 bits (e / s rounded half up at the output scale), '
             'saturated to 127. At most 32767 values per softmax.'),
        since='1.1',
        fields={'shape': {'type': 'array',
                          'items': {'type': 'integer', 'minimum': 1},
                          'minItems': 1,
                          'description': "One image's input and output shape; normalized over its last axis."}},
    )
    label_prefix: ClassVar[str] = "smax"

    shape: tuple[int, ...]  # one image's input (and output) shape; normalized over the last axis
    input_log2scale: int
    output_log2scale: int
    dtype: str = "int8"

    @property
    def classes(self) -> int:
        return int(self.shape[-1])

    def macs(self) -> int:
        return 0

    def shifts(self) -> list[Shift]:
        # the numerator e * 2^(output_log2scale + 1) of the rounded division
        return [Shift("output_log2scale + 1", self.output_log2scale + 1)]

    def accumulator_bound(self, params: dict | None = None) -> int:
        """The sum of the exps (the numerator, e * 2^(output_log2scale + 1) + sum, is taken in 64 bits)."""
        return self.classes * 2**EXP_BITS

    def fused_operators(self) -> list[str]:
        return ["softmax", "requantize"]

    def rows(self) -> int:
        """Vectors normalized per image."""
        return math.prod(self.shape[:-1])
