"""The resize records, each of both dialects: resize_bilinear (seed 000 ResizeBilinear) with its fixed-point source
coordinates (TensorFlow's on TF2IR, TFLite's integer ones on the tflite_int8 dialect), and resize_nearest (a TF2IR
extension) with TensorFlow's and TFLite's nearest source indices; the kernels and every backend share them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.ir.ops.resize.affine import interpolation
from core.ir.records import (OUTPUT_GRID, AnyDialect, IrLayer, OneInputOneOutput, OpSchema, SharedGrid, Shift, Size, grid_field,
                              omitted_when, written_in)
from core.quantize.grid import AffineGrid, Pow2Grid
from core.quantize.tflite_math import round_half_away

# fractional bits of the source coordinates, and so of the interpolation weights
RESIZE_FRAC_BITS = 10


@dataclass(frozen=True, kw_only=True)
class ResizeBilinearLayer(AnyDialect, OneInputOneOutput, IrLayer):
    """Of both dialects: each output the sum of four input values weighted in 2^-2F units (the coordinates of
    `coordinates`), moved to the output grid by `output_shift` and rounded: TF2IR's coordinates are TensorFlow's
    source coordinates rounded half up to F bits and its shift rounds half up; the tflite_int8 dialect's are TFLite's
    integer positions (ComputeInterpolationValuesInteger), on one grid, rounded half away from zero."""

    operation: ClassVar[str] = "resize_bilinear"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": ("Bilinear resize in fixed point. Source coordinates follow TensorFlow's ResizeBilinear for "
                       'align_corners / half_pixel_centers, computed exactly in integers, rounded half up to 10 fractional '
                       'bits and clamped to [0, (in-1) * 2^10]; lower = floor, upper = min(lower + 1, in - 1), weight in [0, '
                       '1024). Interpolation horizontally then vertically in int32 without intermediate rounding, then a right '
                       'shift by 20 + input_log2scale - output_log2scale with round half up, then saturation to int8.'),
             "tflite_int8": ('Bilinear resize on the tflite_int8 scheme (reference_ops::ResizeBilinearInteger): positions in 2^-10 '
                             'units, each output the weighted sum of four inputs in 2^-20 units, rounded half away from zero.')},
        since={"tf2ir": None, "tflite_int8": "1.2"},
    )
    label_prefix: ClassVar[str] = "rsz"

    dtype: str = written_in("tf2ir", "int8")
    align_corners: bool
    # TF2IR's: written only when the graph sets it (true); absent means false, the original tool's (and TF1's) convention
    half_pixel_centers: bool = omitted_when(False, "tf2ir")
    input_log2scale: int | None = written_in("tf2ir", None)  # the tflite_int8 dialect's input is on the output's grid
    grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)  # the output's
    input_channel_num: int
    input_size: Size
    output_size: Size
    output_channel_num: int | None = written_in("tflite_int8", None)  # the input's: channels pass through

    def grid_of_input(self, position: int) -> Pow2Grid | AffineGrid:
        return Pow2Grid(self.input_log2scale) if self.on_pow2_grids else self.grid

    def grid_of_output(self) -> Pow2Grid | AffineGrid:
        return self.grid

    def shape_of_output(self) -> tuple[int, ...]:
        return self.output_size.height, self.output_size.width, self.input_channel_num  # channels pass through

    @property
    def output_shift(self) -> int:
        """The right shift of the interpolated value (scale 2^(2F + input_log2scale)) to the output grid."""
        return 2 * RESIZE_FRAC_BITS + (self.input_log2scale - self.grid.log2scale if self.on_pow2_grids else 0)

    @property
    def rounding(self) -> str:
        """How the output shift rounds: "half_up" (TF2IR) or "half_away" (from zero: TFLite's)."""
        return "half_up" if self.on_pow2_grids else "half_away"

    def shifts(self) -> list[Shift]:
        if not self.on_pow2_grids:
            return []
        return [Shift(f"the output shift 2*{RESIZE_FRAC_BITS} + input_log2scale - output_log2scale", self.output_shift)]

    def coordinates(self, axis: str):
        """(lower, upper, weight) per output row ("y") or column ("x"): source_coordinates (TF2IR) or TFLite's
        integer interpolation, whose weight, position - lower x 2^F, may leave [0, 2^F) at the edges."""
        size = 0 if axis == "y" else 1
        in_size, out_size = self.input_size.pair()[size], self.output_size.pair()[size]
        if self.on_pow2_grids:
            return source_coordinates(in_size, out_size, self.align_corners, self.half_pixel_centers)
        position, lower, upper = interpolation(out_size, in_size, self.align_corners, self.half_pixel_centers)
        return lower, upper, position - (lower << RESIZE_FRAC_BITS)

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> int | None:
        # TF2IR: no accumulator, |value| <= 2^27 in int32 by construction; TFLite's: four taps x 2^20 of weight
        return None if self.on_pow2_grids else 128 << 20

    def fused_operators(self) -> list[str]:
        return ["resize_bilinear", "requantize"] if self.on_pow2_grids else ["resize_bilinear"]


def source_coordinates(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool):
    """(lower, upper, weight) per output index along one axis: the source coordinate
    src = lower + weight / 2^RESIZE_FRAC_BITS of resize_bilinear_kernel."""
    one = 1 << RESIZE_FRAC_BITS
    i = np.arange(out_size, dtype=np.int64)
    if align_corners and out_size > 1:
        numerator, denominator = i * (in_size - 1), out_size - 1
    elif half_pixel_centers:
        numerator, denominator = (2 * i + 1) * in_size - out_size, 2 * out_size
    else:
        numerator, denominator = i * in_size, out_size
    fixed = (2 * numerator * one + denominator) // (2 * denominator)  # round-half-up of src * 2^F
    fixed = np.clip(fixed, 0, (in_size - 1) * one)
    lower = fixed >> RESIZE_FRAC_BITS
    return lower, np.minimum(lower + 1, in_size - 1), fixed - (lower << RESIZE_FRAC_BITS)


def nearest_indices(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool) -> np.ndarray:
    """The source index of each output index along one axis, as TensorFlow's ResizeNearestNeighbor and TFLite's
    reference_ops::ResizeNearestNeighbor compute it, in float32: scale = (in - 1) / (out - 1) with align_corners
    (and out > 1), else in / out; src = (i + 1/2) * scale with half_pixel_centers, else i * scale; rounded (align_corners,
    half away from zero, as roundf) or floored; at most in - 1 (and, with half_pixel_centers, at least 0)."""
    if align_corners and out_size > 1:
        scale = np.float32(in_size - 1) / np.float32(out_size - 1)
    else:
        scale = np.float32(in_size) / np.float32(out_size)
    source = (np.arange(out_size, dtype=np.float32) + np.float32(0.5 if half_pixel_centers else 0.0)) * scale
    index = (round_half_away(source) if align_corners else np.floor(source)).astype(np.int64)
    index = np.minimum(index, in_size - 1)
    return np.maximum(index, 0) if half_pixel_centers else index


@dataclass(frozen=True, kw_only=True)
class ResizeNearestLayer(SharedGrid, OneInputOneOutput, IrLayer):
    """Each output pixel a copy of one input pixel: the same integers on the same grid (both dialects)."""

    operation: ClassVar[str] = "resize_nearest"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": ("Nearest-neighbour resize (an extension), a copy at the input's scale: out[y][x] = in[sy][sx] with "
                       "TensorFlow's ResizeNearestNeighbor source indices computed in float32: scale = (in - 1) / (out - 1) "
                       'with align_corners (out > 1), else in / out; src = (i + 0.5) * scale with half_pixel_centers, else i * '
                       'scale; rounded half away from zero with align_corners, else floored; at most in - 1 (at least 0 with '
                       'half_pixel_centers).'),
             "tflite_int8": ('Nearest-neighbour resize on the tflite_int8 scheme (reference_ops::ResizeNearestNeighbor): each output '
                             'pixel the input pixel at floor((i + offset) x scale) in float32 (rounded with align_corners).')},
        since={"tf2ir": "1.1", "tflite_int8": "1.2"},
        fields={'log2scale': {'type': 'integer', 'description': 'Shared by input and output: a copy moves no value.'}},
    )
    label_prefix: ClassVar[str] = "near"

    dtype: str = written_in("tf2ir", "int8")
    align_corners: bool
    half_pixel_centers: bool
    grid: Pow2Grid | AffineGrid = grid_field()  # the input's and the output's: a copy moves no value
    input_channel_num: int
    input_size: Size
    output_size: Size
    output_channel_num: int | None = written_in("tflite_int8", None)  # the input's: a copy of pixels

    def shape_of_output(self) -> tuple[int, ...]:
        return self.output_size.height, self.output_size.width, self.input_channel_num

    def indices(self, axis: str) -> np.ndarray:
        """The source row ("y") or column ("x") of each output row or column."""
        size = 0 if axis == "y" else 1
        return nearest_indices(self.input_size.pair()[size], self.output_size.pair()[size], self.align_corners,
                               self.half_pixel_centers)

    def fused_operators(self) -> list[str]:
        return ["resize_nearest"]
