"""The softmax IR record, of both dialects: int8 in, int8 out over the last axis, in integer arithmetic only, by one of
two algorithms the record declares (`normalization`): TF2IR's (an extension) `ExpTableDivision`, an exp table, a sum and
one rounded division, so every backend computes the same bits (the table depends on input_log2scale and beta only:
every consumer derives it here); the tflite_int8 dialect's `FixedPointSoftmax`, TFLite's (affine.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.ir.fields import shape_array
from core.ir.records import (INPUT_GRID, OUTPUT_GRID, InputOutputGrids, IrLayer, OpSchema, SameShapeInput, Shift, grid_field, omitted_when,
                             written_in)
from core.quantize.grid import AffineGrid, Pow2Grid

EXP_BITS = 16  # exp_table's fractional bits: exp(0) = 2^16
EXP_TABLE_SIZE = 256  # max - x of two int8 values: 0 .. 255
MAX_CLASSES = (2**31 - 1) // 2**EXP_BITS  # the sum of the exps stays an int32


def exp_table(input_log2scale: int, beta: float = 1.0) -> np.ndarray:
    """int32[256]: e[d] = floor(2^16 * exp(-d * beta * 2^-input_log2scale) + 1/2), d = max - x, in double (a beta of
    1e30 leaves e[0] alone: the arg-max's one-hot, as TFLite's)."""
    d = np.arange(EXP_TABLE_SIZE, dtype=np.float64)
    return np.floor(np.exp(-d * float(beta) * 2.0**-input_log2scale) * 2.0**EXP_BITS + 0.5).astype(np.int32)


@dataclass(frozen=True)
class ExpTableDivision:
    """TF2IR's softmax: e = exp_table(input_log2scale, beta)[max - x], their sum s in int32, each output
    floor((e * 2^(output_log2scale + 1) + s) / (2 s)) in 64 bits (kernel.py: softmax_model)."""

    input_log2scale: int
    output_log2scale: int
    beta: float

    def shifts(self) -> list[Shift]:
        # the numerator e * 2^(output_log2scale + 1) of the rounded division
        return [Shift("output_log2scale + 1", self.output_log2scale + 1)]

    def accumulator_bound(self, classes: int) -> int:
        """The sum of the exps (the numerator, e * 2^(output_log2scale + 1) + sum, is taken in 64 bits)."""
        return classes * 2**EXP_BITS


@dataclass(frozen=True)
class FixedPointSoftmax:
    """TFLite's softmax (reference_ops::Softmax, int8; its int16 kernel's lookup tables at 16 bits, generated in
    `lut_precision`), in gemmlowp fixed point (affine.py): no shift of the IR's, no integer accumulator of its own."""

    input_scale: float
    beta: float
    bits: int
    lut_precision: str

    def shifts(self) -> list[Shift]:
        return []

    def accumulator_bound(self, classes: int) -> None:
        return None


@dataclass(frozen=True, kw_only=True)
class SoftmaxLayer(InputOutputGrids, SameShapeInput, IrLayer):
    """Of both dialects, each with its own arithmetic (`normalization`; the kernel, the C emitter and the lowering ask
    it): TF2IR's
    (an extension) an exp table of the input's log2scale, a sum and one rounded division; the tflite_int8
    dialect's TFLite's gemmlowp fixed point (affine.py), its output at scale 1/256, zero point -128."""

    operation: ClassVar[str] = "softmax"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": ('Softmax over the last axis in integers (an extension): d = max(x) - x in [0, 255]; e = floor(2^16 * '
                       'exp(-d * beta * 2^-input_log2scale) + 1/2) in double (a 256-entry table of input_log2scale and beta); s = sum(e); y = floor((e * '
                       '2^(output_log2scale + 1) + s) / (2 s)) in 64 bits (e / s rounded half up at the output scale), '
                       'saturated to 127. At most 32767 values per softmax.'),
             "tflite_int8": ('Softmax over the last axis on the tflite_int8 scheme (TFLite\'s int8 SOFTMAX, reference_ops::Softmax), in gemmlowp '
                             'fixed point: each d = x - row max rescaled by input_scale x beta onto Q5.26 (PreprocessSoftmaxScaling\'s '
                             'multiplier and left shift), exp(d) in Q0 where d >= diff_min (else 0), the sum of exp(d) / 2^12 rounded '
                             '(Q12.19), its reciprocal by GetReciprocal, each output RoundingDivideByPOT(reciprocal x exp(d), bits over one '
                             '+ 23) - 128, saturated. Output scale 1/256, zero point -128.')},
        since={"tf2ir": "1.1", "tflite_int8": "1.2"},
        fields={'shape': {'type': 'array',
                          'items': {'type': 'integer', 'minimum': 1},
                          'minItems': 1,
                          'description': "One image's input and output shape; normalized over its last axis."},
                "beta": {"type": "number", "exclusiveMinimum": 0,
                         "description": "The logits' multiplier (TFLite's SoftmaxOptions.beta: a temperature's inverse); absent in "
                                        "TF2IR's JSON: 1."},
                "lut_precision": {"enum": ["float"],
                                  "description": "An int16 softmax's lookup tables generated in float (TFLite Micro's gen_lut<float>); "
                                                 "absent: in double (LiteRT's)."}},
        fields_in={"tflite_int8": {"shape": shape_array("One image's input and output shape; normalized over its last axis.")}},
    )
    label_prefix: ClassVar[str] = "smax"

    shape: tuple[int, ...]  # one image's input (and output) shape; normalized over the last axis
    input_grid: Pow2Grid | AffineGrid = grid_field(INPUT_GRID)
    output_grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)
    dtype: str = written_in("tf2ir", "int8")
    beta: float = omitted_when(1.0, "tf2ir")  # the logits' multiplier (TFLite's SoftmaxOptions.beta)
    lut_precision: str = written_in("tflite_int8", "double", omit_default=True)  # int16's tables: the runtime's gen_lut type

    @property
    def classes(self) -> int:
        return int(self.shape[-1])

    def macs(self) -> int:
        return 0

    @property
    def normalization(self) -> ExpTableDivision | FixedPointSoftmax:
        if self.on_pow2_grids:
            return ExpTableDivision(self.log2scale_of_input(0), self.log2scale_of_output(), self.beta)
        return FixedPointSoftmax(self.input_grid.step, self.beta, self.activation_bits, self.lut_precision)

    def shifts(self) -> list[Shift]:
        return self.normalization.shifts()

    def accumulator_bound(self, params: dict | None = None) -> int | None:
        return self.normalization.accumulator_bound(self.classes)

    def fused_operators(self) -> list[str]:
        return ["softmax", "requantize"]

    def rows(self) -> int:
        """Vectors normalized per image."""
        return math.prod(self.shape[:-1])
