"""One rescale step of an integer model, typed by its rounding rule: the integers of one scale moved to another's.
TF2IR's power-of-two shift (seed 000) is the special case of TFLite's quantized multiplier of one. A model applies a
rescale (`applied`) through the builder it is rendered with (core/frontend/layers.IntegerModelBuilder: the annotated
graph's ops, the simulator's arrays, C, the accelerator's ALU), which computes each rule by its own `round_shift` or
`rescale`; so the rounding is an attribute of the step, and no model or backend asks which dialect it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ShiftRescale:
    """x * 2^-shift: a right shift (shift > 0) rounded half up, a left shift exact (TF2IR's)."""

    shift: int

    def applied(self, model: Any, tensor: Any) -> Any:
        return model.round_shift(tensor, self.shift)


@dataclass(frozen=True)
class MultiplierRescale:
    """TFLite's MultiplyByQuantizedMultiplier: x * multiplier * 2^(shift - 31), SaturatingRoundingDoublingHighMul then
    RoundingDivideByPOT (a positive shift is a left shift before the multiply)."""

    multiplier: int
    shift: int

    def applied(self, model: Any, tensor: Any) -> Any:
        return model.rescale(tensor, self.multiplier, self.shift)


Rescale = ShiftRescale | MultiplierRescale


def less_zero_point(model: Any, tensor: Any, zero_point: int) -> Any:
    """q - z, the integer step an affine grid's values start from (nothing on a grid of zero point 0)."""
    return model.op("Sub", [tensor, model.const("zero_point", zero_point)]) if zero_point else tensor


def onto_output(model: Any, tensor: Any, zero_point: int, clamp: tuple[int, int]) -> Any:
    """The output's zero point added (none on TF2IR's grids), clamped to the fused activation's range."""
    if zero_point:
        tensor = model.op("AddV2", [tensor, model.const("zero_point", zero_point)])
    return model.clamp(tensor, *clamp)
