"""The resize_bilinear layer's integer kernel."""

from __future__ import annotations

import numpy as np

from core.ir.fixedpoint import round_half_away_shift, round_shift, saturate
from core.ir.ops.resize.record import RESIZE_FRAC_BITS, ResizeBilinearLayer, ResizeNearestLayer


def resize_bilinear_kernel(record: ResizeBilinearLayer, params: dict, inputs: list) -> np.ndarray:
    """int8 NHWC -> int8 NHWC (int16 at TFLite's 16x8) bilinear resize in fixed point, F = RESIZE_FRAC_BITS = 10.

    1. Source coordinate of output row (column) i, as TensorFlow's ResizeBilinear defines it:
       align_corners (and out > 1): src = i * (in - 1) / (out - 1);
       half_pixel_centers:          src = (i + 1/2) * in / out - 1/2;
       otherwise:                   src = i * in / out.
       Computed exactly (integers) and rounded half up to F fractional bits:
       S = floor(src * 2^F + 1/2), clamped to [0, (in - 1) * 2^F].
    2. lower = S >> F, upper = min(lower + 1, in - 1), weight w = S - lower * 2^F in [0, 2^F).
    3. In int32, no intermediate rounding (|value| <= 2^27):
       top    = x[ly][lx] * (2^F - wx) + x[ly][ux] * wx
       bottom = x[uy][lx] * (2^F - wx) + x[uy][ux] * wx
       value  = top * (2^F - wy) + bottom * wy          (scale 2^(2F + input_log2scale))
    4. out = value shifted right by 2F + input_log2scale - output_log2scale with round-half-up
       (the IR refuses a shift outside the target's range), saturated to [-128, 127].
    On the tflite_int8 dialect (TFLite's ResizeBilinearInteger), steps 1-2 are TFLite's integer positions
    (record.coordinates) and step 4 divides by 2^2F rounding half away from zero.
    The only roundings are step 1's (when src is not a multiple of 2^-F) and step 4's: within
    1 LSB of TF's float ResizeBilinear followed by round-half-up whenever
    output_log2scale <= input_log2scale + 1 (step 1 moves the value by at most
    255 * 2^-F input LSB), and exact when every source coordinate is a multiple of 2^-F: e.g.
    align_corners with (out - 1) / (in - 1) a power of two <= 2^F or (in - 1) / (out - 1) an
    integer; half_pixel_centers or neither with out / in a power of two <= 2^(F-1) or in / out
    an integer."""
    x = np.asarray(inputs[0], dtype=np.int64)
    expected = list(record.shape_of_input(0))
    if x.ndim != 4 or list(x.shape[1:]) != expected:
        raise ValueError(f"input of shape {x.shape}; the layer takes [N, {expected[0]}, {expected[1]}, {expected[2]}]")
    ly, uy, wy = record.coordinates("y")
    lx, ux, wx = record.coordinates("x")
    one = 1 << RESIZE_FRAC_BITS
    wx, wy = wx[None, None, :, None], wy[None, :, None, None]
    top_rows, bottom_rows = x[:, ly], x[:, uy]
    top = top_rows[:, :, lx] * (one - wx) + top_rows[:, :, ux] * wx
    bottom = bottom_rows[:, :, lx] * (one - wx) + bottom_rows[:, :, ux] * wx
    value = top * (one - wy) + bottom * wy
    if record.rounding == "half_up":
        return saturate(round_shift(value, record.output_shift))
    limits = np.iinfo(record.integer_dtype)  # TFLite's ResizeBilinearInteger is one template for int8 and int16
    return np.clip(round_half_away_shift(value, record.output_shift), limits.min, limits.max).astype(record.integer_dtype)


def resize_nearest_kernel(record: ResizeNearestLayer, params: dict, inputs: list) -> np.ndarray:
    """NHWC -> NHWC of the same integers (int8, or int16 at 16x8): out[y][x] = in[indices("y")[y]][indices("x")[x]]."""
    x = np.asarray(inputs[0])
    if x.ndim != 4 or tuple(x.shape[1:]) != record.shape_of_input(0):
        raise ValueError(f"input of shape {x.shape}; the layer takes [N, *{list(record.shape_of_input(0))}]")
    return x[:, record.indices("y")][:, :, record.indices("x")].astype(record.integer_dtype, copy=False)
