"""add's requantization on the tflite_int8 scheme, as add.cc's int8 Prepare derives it (the arithmetic: kernel.py's
add_arithmetic): each input, less its zero point, shifted left 20 bits (int16's: 15) and rescaled by its own multiplier to twice
the larger input scale; the sum rescaled to the output scale."""

from __future__ import annotations

import numpy as np

from core.quantize.tflite_math import quantize_multiplier

LEFT_SHIFT = 20  # int8 inputs: headroom for the rescaled values in int32
LEFT_SHIFTS = {8: LEFT_SHIFT, 16: 15}  # by the activations' width: int16's (the 16x8 mode's general scales) leave 15


def add_requantization(first_scale: float, second_scale: float, output_scale: float,
                       left_shift: int = LEFT_SHIFT) -> tuple[tuple[int, int], ...]:
    """(multiplier, shift) of each input and of the output, as add.cc derives them in double from the
    float32 scales: twice the larger input scale (a float32 product), each input's scale over it, and it
    over 2^left_shift x the output scale (a float32 product)."""
    twice_max = float(np.float32(2) * max(np.float32(first_scale), np.float32(second_scale)))
    output = float(np.float32(1 << left_shift) * np.float32(output_scale))
    return (quantize_multiplier(float(np.float32(first_scale)) / twice_max),
            quantize_multiplier(float(np.float32(second_scale)) / twice_max),
            quantize_multiplier(twice_max / output))
