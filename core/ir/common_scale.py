"""Operations whose operands are each rescaled to one common scale before they are combined element for element (TF2IR's
add, seed 000 4.2; TFLite's ADD and SUB, whose Prepare derive the same numbers): the typed numbers of that
requantization (`CommonScaleRequantization`), each dialect's derivation of them (`shift_requantization`: TF2IR's, the
finer operand aligned to the coarser; `common_scale_multipliers`: add.cc's and sub.cc's, which a tflite_int8 record holds
and `multiplier_requantization` types), and the first step of their arithmetic (`rescaled_operands`). An operation's own arithmetic (its folder's kernel.py) combines what the step gives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.ir.activations import activation_named
from core.ir.rescale import MultiplierRescale, Rescale, ShiftRescale, less_zero_point
from core.quantize.tflite_math import quantize_multiplier

LEFT_SHIFT = 20  # int8 inputs: headroom for the rescaled values in int32
LEFT_SHIFTS = {8: LEFT_SHIFT, 16: 15}  # by the activations' width: int16's (the 16x8 mode's general scales) leave 15


@dataclass(frozen=True)
class CommonScaleRequantization:
    """The numbers of the arithmetic: each input's zero point, the left shift of the inputs (headroom), each input's
    rescale to the common scale, the combination's to the output, the output zero point and the clamp of the fused
    activation."""

    input_zero_points: tuple[int, ...]
    left_shift: int
    input_rescales: tuple[Rescale, ...]
    output_rescale: Rescale
    output_zero_point: int
    clamp: tuple[int, int]


def shift_requantization(input_log2scales, output_log2scale: int, activation: str) -> CommonScaleRequantization:
    """TF2IR's (seed 000, 4.2 ADD): the common scale the coarser operand's, the finer operand shifted right to it, the
    result shifted by output_log2scale - the coarser; zero points 0, no headroom, the activation's clamp."""
    coarse = min(input_log2scales)
    return CommonScaleRequantization((0,) * len(input_log2scales), 0, tuple(ShiftRescale(scale - coarse) for scale in input_log2scales),
                                     ShiftRescale(coarse - output_log2scale), 0, activation_named(activation).clamp(output_log2scale))


def multiplier_requantization(input_grids, output_grid, left_shift: int, input_multipliers, input_shifts, output_multiplier: int,
                              output_shift: int, clamp: tuple[int, int]) -> CommonScaleRequantization:
    """TFLite's, from the numbers a record of the tflite_int8 dialect holds (common_scale_multipliers' for each input and
    the output) and its grids' zero points."""
    return CommonScaleRequantization(tuple(grid.zero_point for grid in input_grids), left_shift,
                                     tuple(MultiplierRescale(multiplier, shift) for multiplier, shift in zip(input_multipliers, input_shifts)),
                                     MultiplierRescale(output_multiplier, output_shift), output_grid.zero_point, clamp)


def common_scale_multipliers(first_scale: float, second_scale: float, output_scale: float,
                             left_shift: int = LEFT_SHIFT) -> tuple[tuple[int, int], ...]:
    """(multiplier, shift) of each input and of the output, as add.cc and sub.cc derive them in double from the float32
    scales: twice the larger input scale (a float32 product), each input's scale over it, and it over 2^left_shift x
    the output scale (a float32 product)."""
    twice_max = float(np.float32(2) * max(np.float32(first_scale), np.float32(second_scale)))
    output = float(np.float32(1 << left_shift) * np.float32(output_scale))
    return (quantize_multiplier(float(np.float32(first_scale)) / twice_max),
            quantize_multiplier(float(np.float32(second_scale)) / twice_max),
            quantize_multiplier(twice_max / output))


def rescaled_operands(model: Any, inputs: list, requantization: CommonScaleRequantization) -> list:
    """Each input less its zero point, times 2^left_shift (TFLite's headroom: 20 bits for int8, 15 for int16), rescaled by
    its own step to the common scale: TF2IR's the finer operand shifted right to the coarser's, half up; TFLite's
    MultiplyByQuantizedMultiplier to twice the larger input scale."""
    scaled = []
    for tensor, zero_point, rescale in zip(inputs, requantization.input_zero_points, requantization.input_rescales):
        centred = less_zero_point(model, tensor, zero_point)
        widened = model.op("Mul", [centred, model.const("left_shift", 1 << requantization.left_shift)]) if requantization.left_shift else centred
        scaled.append(rescale.applied(model, widened))
    return scaled
