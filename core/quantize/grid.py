"""What the integers of a tensor mean in real units, typed: a calibration table entry's grid (TensorEntry.grid), and
the grid an IR layer declares for what it reads and writes.

- `Pow2Grid` (TF2IR): real = q x 2^-log2scale, rounded half up as FakeQuant rounds.
- `AffineGrid` (TFLite's activations): real = scale x (q - zero point), TFLite's rounding.
- `IndexGrid` (token ids an Embedding looks up): integers taken as they are, int32, each a row of a table of
  `vocabulary` rows; not quantized.
- `ChannelGrid` (TFLite's weights and biases): symmetric, zero point 0, one scale per output channel (one scale: per
  tensor).

Callers ask the grid, never which of an entry's optional fields are set. Pow2Grid and AffineGrid also say which IR
dialect lays its layers' values on them and how a layer's JSON writes them, under the key names the layer's record gives
(GridNames: core/ir/records.py), so that the records ask the grid rather than test which kind it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Sequence

import numpy as np

from core.quantize import tflite_math

INT8_MIN, INT8_MAX = -128, 127
INTEGER_TYPES = {8: np.int8, 16: np.int16}  # an affine grid's integers by width


class GridNames(Protocol):
    """The JSON keys of one grid of a layer's record, for either kind of grid."""

    @property
    def log2scale(self) -> str: ...
    @property
    def scale(self) -> str: ...
    @property
    def zero_point(self) -> str: ...


class GridsNames(Protocol):
    """The JSON keys of a record's grids, one per operand: a key each for power-of-two grids, lists for affine ones."""

    @property
    def log2scales(self) -> tuple[str, ...]: ...
    @property
    def scales(self) -> str: ...
    @property
    def zero_points(self) -> str: ...


@dataclass(frozen=True)
class Pow2Grid:
    log2scale: int
    bits: ClassVar[int] = 8  # TF2IR's integers are int8
    dtype: ClassVar[type] = np.int8
    dialect: ClassVar[str] = "tf2ir"  # the IR dialect whose layers' values are on such grids
    # why calibration's range on such a grid can differ from the QAT FakeQuant's it came from (its report says so)
    range_change: ClassVar[str] = "not a power-of-two range"

    @staticmethod
    def json_keys(names: GridNames) -> tuple[str, ...]:
        return (names.log2scale,)

    def to_json(self, names: GridNames) -> dict[str, Any]:
        return {names.log2scale: self.log2scale}

    @classmethod
    def from_json(cls, data: dict[str, Any], names: GridNames, bits: int) -> Pow2Grid:
        return cls(int(data[names.log2scale]))

    @staticmethod
    def operands_json_keys(names: GridsNames) -> tuple[str, ...]:
        return names.log2scales

    @staticmethod
    def operands_to_json(grids: Sequence[Pow2Grid], names: GridsNames) -> dict[str, Any]:
        return {key: grid.log2scale for key, grid in zip(names.log2scales, grids)}

    @classmethod
    def operands_from_json(cls, data: dict[str, Any], names: GridsNames, bits: int) -> tuple[Pow2Grid, ...]:
        return tuple(cls(int(data[key])) for key in names.log2scales)

    def quantize(self, values: np.ndarray) -> np.ndarray:
        """real -> int8: round half up (as FakeQuant does), saturate."""
        scaled = np.floor(np.asarray(values, dtype=np.float64) * 2.0**self.log2scale + 0.5)
        return np.clip(scaled, INT8_MIN, INT8_MAX).astype(np.int8)

    def dequantize(self, values: np.ndarray) -> np.ndarray:
        return values.astype(np.float32) * np.float32(2.0**-self.log2scale)

    @property
    def step(self) -> float:
        """The real value of one integer step."""
        return 2.0 ** -self.log2scale

    @property
    def zero_point(self) -> int:
        """The integer of real 0: symmetric."""
        return 0

    def fake_quantized(self, values: np.ndarray, bits: int) -> np.ndarray:
        """`values` as a FakeQuant of the grid gives them (round half up, saturate at `bits`), in float64."""
        step = self.step
        return np.clip(np.floor(np.asarray(values, np.float64) / step + 0.5), -(2 ** (bits - 1)), 2 ** (bits - 1) - 1) * step

    @property
    def clip_margin(self) -> float:
        """How far past the range's end a value still rounds to its end: none (a power-of-two range's magnitude is its
        -min; see core/quantize/schemes/base.py: clipped_fraction)."""
        return 0.0

    def named(self):
        """How a report names the grid."""
        return self.log2scale


@dataclass(frozen=True)
class AffineGrid:
    scale: float
    zero_point: int
    bits: int = 8  # the integers' width: 8, or 16 (TFLite's 16x8 mode's activations)
    dialect: ClassVar[str] = "tflite_int8"  # the IR dialect whose layers' values are on such grids (at 8 or 16 bits)
    range_change: ClassVar[str] = "a symmetric range"

    @staticmethod
    def json_keys(names: GridNames) -> tuple[str, ...]:
        return (names.scale, names.zero_point)

    def to_json(self, names: GridNames) -> dict[str, Any]:
        return {names.scale: self.scale, names.zero_point: self.zero_point}

    @classmethod
    def from_json(cls, data: dict[str, Any], names: GridNames, bits: int) -> AffineGrid:
        return cls(float(data[names.scale]), int(data[names.zero_point]), bits)

    @staticmethod
    def operands_json_keys(names: GridsNames) -> tuple[str, ...]:
        return (names.scales, names.zero_points)

    @staticmethod
    def operands_to_json(grids: Sequence[AffineGrid], names: GridsNames) -> dict[str, Any]:
        return {names.scales: [grid.scale for grid in grids], names.zero_points: [grid.zero_point for grid in grids]}

    @classmethod
    def operands_from_json(cls, data: dict[str, Any], names: GridsNames, bits: int) -> tuple[AffineGrid, ...]:
        return tuple(cls(float(scale), int(zero_point), bits) for scale, zero_point in zip(data[names.scales], data[names.zero_points]))

    def quantize(self, values: np.ndarray) -> np.ndarray:
        return tflite_math.affine_quantize(values, self.scale, self.zero_point, self.bits)

    @property
    def qmin(self) -> int:
        return -(1 << (self.bits - 1))

    @property
    def qmax(self) -> int:
        return (1 << (self.bits - 1)) - 1

    @property
    def dtype(self) -> type:
        """The integers' NumPy type."""
        return INTEGER_TYPES[self.bits]

    def dequantize(self, values: np.ndarray) -> np.ndarray:
        return tflite_math.dequantize(values, self.scale, self.zero_point)

    @property
    def step(self) -> float:
        return self.scale

    @property
    def clip_margin(self) -> float:
        """Half a step: a value within it past the range's end rounds to the end (as the converter's nudged zero point
        leaves the largest value of a minmax range)."""
        return self.scale / 2

    def named(self):
        return [self.scale, self.zero_point]


@dataclass(frozen=True)
class IndexGrid:
    vocabulary: int  # the rows of the table the ids index: an id is in [0, vocabulary)
    bits: ClassVar[int] = 32
    dtype: ClassVar[type] = np.int32
    zero_point: ClassVar[int] = 0
    dialect: ClassVar[None] = None  # not quantized: no dialect's grid

    def quantize(self, values: np.ndarray) -> np.ndarray:
        """token ids -> int32, as they are; a ValueError naming the first id that is not a whole number in [0,
        vocabulary) (TFLite's GATHER refuses it at run time)."""
        values = np.asarray(values)
        ids = values.astype(np.int64) if values.dtype.kind in "iu" else np.rint(np.asarray(values, np.float64))
        wrong = (ids != values) | (ids < 0) | (ids >= self.vocabulary)
        if np.any(wrong):
            position = tuple(int(axis) for axis in np.argwhere(wrong)[0])
            raise ValueError(f"token id {values[position]!r} at {list(position)} is not in [0, {self.vocabulary}): the Embedding's "
                             f"vocabulary has {self.vocabulary} rows")
        return ids.astype(np.int32)

    def dequantize(self, values: np.ndarray) -> np.ndarray:
        return np.asarray(values, np.int32)

    def named(self):
        return f"ids < {self.vocabulary}"


@dataclass(frozen=True)
class ChannelGrid:
    scales: tuple[float, ...]  # per output channel, along the weight's last (merged) channel axis; one: per tensor
    dialect: ClassVar[None] = None  # weights' and biases': a layer's values are on its activations' grids
    range_change: ClassVar[str] = "a symmetric range"

    def fake_quantized(self, values: np.ndarray, bits: int) -> np.ndarray:
        """`values` rounded to the nearest step of their channel's scale and saturated at `bits`, in float64."""
        values = np.asarray(values, dtype=np.float64)
        scales = np.asarray(self.scales, dtype=np.float64)
        flat = values.reshape(-1, scales.size)
        return (np.clip(np.round(flat / scales), -(2 ** (bits - 1)), 2 ** (bits - 1) - 1) * scales).reshape(values.shape)

    @property
    def clip_margin(self) -> float:
        return 0.0

    def named(self):
        return list(self.scales)


Grid = Pow2Grid | AffineGrid | ChannelGrid


def power_of_two_log2scale(grid: Grid | IndexGrid) -> int | None:
    """The grid's log2scale where it is a power-of-two grid (TF2IR's: its integers are moved between scales by shifts);
    None for any other, which has no log2scale."""
    return grid.log2scale if isinstance(grid, Pow2Grid) else None
