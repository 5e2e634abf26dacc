"""The add IR record (seed 000, 4.2 ADD; the tflite_int8 dialect's since 1.2), of both dialects: pl + add, each on its
own grid, into the output's. TF2IR: the finer operand aligned to the coarser by a shift, the sum shifted to the output
scale, the activation's clamp. The tflite_int8 dialect (reference_integer_ops::Add): each input less its zero point,
shifted left by left_shift and rescaled by its multiplier and shift, summed, rescaled, plus the output zero point,
clamped to [output_min, output_max]."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from core.ir.activations import Activated
from core.ir.common_scale import LEFT_SHIFT, LEFT_SHIFTS, CommonScaleRequantization, multiplier_requantization, shift_requantization
from core.ir.fields import shape_array
from core.ir.records import OUTPUT_GRID, AnyDialect, GridsKeys, IrLayer, OpSchema, Shift, Size, grid_field, written_in
from core.quantize.grid import AffineGrid, Pow2Grid

_PAIR = {"type": "array", "minItems": 2, "maxItems": 2}


@dataclass(frozen=True, kw_only=True)
class AddLayer(AnyDialect, Activated, IrLayer):
    operation: ClassVar[str] = "add"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": 'Element-wise sum of two int8 tensors of the same shape.',
             "tflite_int8": ('Element-wise sum on the tflite_int8 scheme (reference_integer_ops::Add): each input less its zero point, '
                             'shifted left by left_shift and rescaled by its multiplier and shift (to twice the larger input scale), '
                             'summed, rescaled by output_multiplier and output_shift, plus output_zero_point, clamped to [output_min, '
                             'output_max]. The operands are previous_layer in order (the first input, then the second).')},
        since={"tf2ir": None, "tflite_int8": "1.2"},
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
                'add_name': {'type': 'string', 'description': 'Producer of op.inputs[1] (the addend).'},
                "shape": shape_array("One image's shape of both inputs and the output."),
                "input_scales": {**_PAIR, "items": {"type": "number", "exclusiveMinimum": 0}},
                "input_zero_points": {**_PAIR, "items": {"type": "integer", "minimum": -128, "maximum": 127}},
                "input_multipliers": {**_PAIR, "items": {"type": "integer"}},
                "input_shifts": {**_PAIR, "items": {"type": "integer"}},
                "left_shift": {"enum": sorted(set(LEFT_SHIFTS.values())),
                               "description": "Headroom of the rescaled inputs in int32 (add.cc: 20 for int8, 15 for int16)."},
                "output_multiplier": {"type": "integer"},
                "output_shift": {"type": "integer", "description": "TFLite's convention: positive shifts left."}},
    )
    label_prefix: ClassVar[str] = "add"

    input_grids: tuple[Pow2Grid | AffineGrid, ...] = grid_field(GridsKeys(("pl_log2scale", "add_log2scale")))
    output_grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)
    # TF2IR's
    activation_type: str = written_in("tf2ir", "None")
    input_channel_num: int | None = written_in("tf2ir", None)
    input_size: Size | None = written_in("tf2ir", None)
    size: int | None = written_in("tf2ir", None)
    dtype: str = written_in("tf2ir", "int8")
    pl_shiftbit: int | None = written_in("tf2ir", None)  # legacy names of the log2scales
    add_shiftbit: int | None = written_in("tf2ir", None)
    output_shift_bit: int | None = written_in("tf2ir", None)  # output_log2scale - the coarser operand's log2scale
    pl_name: str | None = written_in("tf2ir", None)
    add_name: str | None = written_in("tf2ir", None)
    # the tflite_int8 dialect's: TFLite's requantization of each input and of the sum, and the fused activation's clamp
    shape: tuple[int, ...] = written_in("tflite_int8", ())
    input_multipliers: tuple[int, ...] = written_in("tflite_int8", ())
    input_shifts: tuple[int, ...] = written_in("tflite_int8", ())
    left_shift: int = written_in("tflite_int8", LEFT_SHIFT)
    output_multiplier: int | None = written_in("tflite_int8", None)
    output_shift: int | None = written_in("tflite_int8", None)
    output_min: int = written_in("tflite_int8", -128)
    output_max: int = written_in("tflite_int8", 127)

    @property
    def elementwise(self) -> bool:
        """TF2IR's computes the same on any data layout (seed 004 [0048])."""
        return self.on_pow2_grids

    def grid_of_input(self, position: int) -> Pow2Grid | AffineGrid:
        return self.input_grids[position]

    def grid_of_output(self) -> Pow2Grid | AffineGrid:
        return self.output_grid

    @property
    def pl_log2scale(self) -> int:
        return self.log2scale_of_input(0)

    @property
    def add_log2scale(self) -> int:
        return self.log2scale_of_input(1)

    def operands(self) -> tuple[str, ...]:
        return (self.pl_name, self.add_name) if self.on_pow2_grids else tuple(self.previous_layer)

    def shape_of_output(self) -> tuple[int, ...]:
        if self.on_pow2_grids:
            return self.input_size.height, self.input_size.width, self.input_channel_num
        return tuple(self.shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return self.shape_of_output()

    @property
    def requantization(self) -> CommonScaleRequantization:
        if self.on_pow2_grids:
            return shift_requantization((self.pl_log2scale, self.add_log2scale), self.log2scale_of_output(), self.activation_type)
        return multiplier_requantization(self.input_grids, self.output_grid, self.left_shift, self.input_multipliers, self.input_shifts,
                                         self.output_multiplier, self.output_shift, (self.output_min, self.output_max))

    def shifts(self) -> list[Shift]:
        if not self.on_pow2_grids:
            return []
        # aligning the finer operand, then moving the sum to the output scale
        return [Shift("pl_log2scale - add_log2scale", self.pl_log2scale - self.add_log2scale, signed=True),
                Shift("output_shift_bit", self.output_shift_bit, signed=True)]

    def fused_operators(self) -> list[str]:
        return ["add", "requantize", *(self.activation_operators() if self.on_pow2_grids else ["clamp"])]

    def macs(self) -> int:
        return 0

    def with_lanes(self, channels: int) -> "AddLayer":
        height, width = self.input_size.pair()
        return dataclasses.replace(self, input_channel_num=channels, size=height * width * channels)

    def accumulator_bound(self, params: dict | None = None) -> int | None:
        # TF2IR: no accumulator, |sum| <= 256 at the coarser scale, then a shift; TFLite's: both inputs << left_shift
        return None if self.on_pow2_grids else 2 * (2**self.activation_bits - 1) << self.left_shift
