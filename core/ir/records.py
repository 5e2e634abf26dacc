"""Typed IR layer records: one frozen dataclass per operation (defined in its op folder,
core/ir/ops/<op>/record.py), read from and written to the TF2IR JSON (seed 000, 4.2) with
exactly the spec's keys.

The base class holds the keys every layer has and the questions every consumer asks of a
layer (shapes, scales, multiply-accumulates, shifts, accumulator bound, the fused operators
it stands for); an operation answers them for its own fields, so partition, cost models and
backends never switch on operation names.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from core.quantize.grid import INTEGER_TYPES, AffineGrid, Pow2Grid, power_of_two_log2scale


class IrError(ValueError):
    """A layer the target cannot express, or an IR that does not hold together; the message
    names the layer and the field."""


@dataclass(frozen=True)
class Size:
    """{"height": h, "width": w}."""

    height: int
    width: int

    def pair(self) -> tuple[int, int]:
        return self.height, self.width


@dataclass(frozen=True)
class Padding:
    top: int
    bottom: int
    left: int
    right: int

    def any(self) -> bool:
        return any((self.top, self.bottom, self.left, self.right))

    def as_list(self) -> list[int]:
        return list(self.as_tuple())

    def as_tuple(self) -> tuple[int, int, int, int]:
        return self.top, self.bottom, self.left, self.right


@dataclass(frozen=True)
class Shift:
    """A shift amount a layer's arithmetic needs. `signed`: it may go either way (negative:
    the other direction), so its magnitude is what a shifter must encode."""

    field: str  # the IR field, or the expression of fields, it comes from
    value: int
    signed: bool = False

    @property
    def label(self) -> str:
        return f"|{self.field}|" if self.signed else self.field

    @property
    def amount(self) -> int:
        return abs(self.value) if self.signed else self.value


class OneInputOneOutput:
    """Shapes and scales of a layer with one NHWC input (input_size, input_channel_num, at
    input_log2scale) and one NHWC output (output_size, output_channel_num, at output_log2scale)."""

    def shape_of_output(self) -> tuple[int, ...]:
        return self.output_size.height, self.output_size.width, self.output_channel_num

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return self.input_size.height, self.input_size.width, self.input_channel_num

    def log2scale_of_input(self, position: int) -> int:
        return self.input_log2scale

    def log2scale_of_output(self) -> int:
        return self.output_log2scale


class SameShapeInput:
    """Shapes and scales of a layer with one input and an output of the same `shape` (one
    image's), at input_log2scale and output_log2scale."""

    def shape_of_output(self) -> tuple[int, ...]:
        return tuple(self.shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return tuple(self.shape)

    def log2scale_of_input(self, position: int) -> int:
        return self.input_log2scale

    def log2scale_of_output(self) -> int:
        return self.output_log2scale


DIALECT_KEY = "scheme"  # the JSON key naming a layer's dialect; absent: the base dialect's
# the IR's own dialect (TF2IR's JSON, seed 000): its layers name no dialect (DIALECT_KEY) and no width (BITS_KEY), every
# other dialect is an extension whose layers do; its values lie on power-of-two grids
BASE_DIALECT = Pow2Grid.dialect
BITS_KEY = "activation_bits"  # the tflite_int8 dialect's key of a layer's activation width; absent: 8 (int8)
DEFAULT_BITS = 8
# the kind of grid a layer's values are on, by the dialect the layer is of (each grid kind names its dialect)
GRID_OF_DIALECT: dict[str, type[Pow2Grid] | type[AffineGrid]] = {kind.dialect: kind for kind in (Pow2Grid, AffineGrid)}


def broadcast_strides(shape: tuple[int, ...], output_shape: tuple[int, ...]) -> list[int]:
    """Per output axis, the step in `shape`'s row-major data (0 along a broadcast axis); `shape`
    is aligned to the output's last axes, as NumPy and TensorFlow broadcast."""
    padded = (1,) * (len(output_shape) - len(shape)) + tuple(shape)
    strides, step = [], 1
    for size, out in reversed(list(zip(padded, output_shape))):
        strides.append(0 if size == 1 and out != 1 else step)
        step *= size
    return strides[::-1]


@dataclass(frozen=True)
class GridKeys:
    """How a record's grid field is written, by the grid's kind (core/quantize/grid.py): in TF2IR's JSON as a
    log2scale, in the tflite_int8 dialect's as a scale and a zero point (the layer then says `"scheme": "tflite_int8"`)."""

    log2scale: str = "log2scale"
    scale: str = "output_scale"
    zero_point: str = "output_zero_point"

    def keys(self, dialect: str) -> tuple[str, ...]:
        return GRID_OF_DIALECT[dialect].json_keys(self)

    def write(self, grid: Pow2Grid | AffineGrid) -> dict[str, Any]:
        return grid.to_json(self)

    def read(self, data: dict[str, Any], dialect: str) -> Pow2Grid | AffineGrid:
        return GRID_OF_DIALECT[dialect].from_json(data, self, int(data.get(BITS_KEY, DEFAULT_BITS)))


@dataclass(frozen=True)
class GridsKeys:
    """How a record's input grids, one per operand, are written: in TF2IR's JSON each as a log2scale of its own key,
    in the tflite_int8 dialect's as the items of a scale list and a zero point list."""

    log2scales: tuple[str, ...]
    scales: str = "input_scales"
    zero_points: str = "input_zero_points"

    def keys(self, dialect: str) -> tuple[str, ...]:
        return GRID_OF_DIALECT[dialect].operands_json_keys(self)

    def write(self, grids: tuple[Pow2Grid | AffineGrid, ...]) -> dict[str, Any]:
        return type(grids[0]).operands_to_json(grids, self)

    def read(self, data: dict[str, Any], dialect: str) -> tuple[Pow2Grid | AffineGrid, ...]:
        return GRID_OF_DIALECT[dialect].operands_from_json(data, self, int(data.get(BITS_KEY, DEFAULT_BITS)))


def by_arithmetic(attribute: str, implementations: dict):
    """What computes a record (a kernel, a C emitter, a lowering...) as `implementations` says for the type of its typed
    arithmetic `attribute` (conv's requantization, softmax's normalization): where an operation has two algorithms, the
    choice is the arithmetic's, declared once by the record, not each backend's reading of its grids."""
    def dispatch(record, *arguments):
        return implementations[type(getattr(record, attribute))](record, *arguments)
    return dispatch


def grid_field(keys: GridKeys | GridsKeys = GridKeys()):
    """A record's grid: the dialect of the layer is the grid's, its JSON keys `keys`'."""
    return dataclasses.field(metadata={"grid": keys})


def written_in(dialect: str, default: Any, omit_default: bool = False, optional: bool = False):
    """A field one dialect's JSON has and the others' do not (reading theirs, it is `default`); `omit_default`,
    `optional`: in that dialect's JSON, as omitted_when(default) and optional(default)."""
    return dataclasses.field(default=default, metadata={"written_in": dialect, "omit_default": omit_default, "optional": optional})


class AnyDialect:
    """A record of an operation both dialects share: one class, the dialect its output grid's."""

    dialects: ClassVar[tuple[str, ...]] = tuple(GRID_OF_DIALECT)

    @property
    def dialect(self) -> str:
        return self.grid_of_output().dialect

    @property
    def activation_bits(self) -> int:
        """The width of the layer's activations: its output grid's (8, or 16 in TFLite's 16x8 mode)."""
        return self.grid_of_output().bits

    @property
    def on_pow2_grids(self) -> bool:
        """TF2IR's: the grids are powers of two, moved between by shifts (the tflite_int8 dialect's by multipliers)."""
        return power_of_two_log2scale(self.grid_of_output()) is not None

    def log2scale_of_input(self, position: int) -> int:
        return self._log2scale(self.grid_of_input(position))

    def log2scale_of_output(self) -> int:
        return self._log2scale(self.grid_of_output())

    def _log2scale(self, grid: Pow2Grid | AffineGrid) -> int:
        log2scale = power_of_two_log2scale(grid)
        if log2scale is None:
            raise IrError(f"layer {self.name}: a {self.dialect} layer has a scale and a zero point, no log2scale (grid_of_input, "
                          "grid_of_output)")
        return log2scale


class Copy:
    """A layer that copies values without arithmetic: no multiply-accumulates, no shifts, no accumulator."""

    def macs(self) -> int:
        return 0

    def shifts(self) -> list[Shift]:
        return []

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None


class SharedGrid(Copy, AnyDialect):
    """One `grid` for the input and the output: a layer that moves values without arithmetic (reshape, pad,
    resize_nearest)."""

    def grid_of_input(self, position: int) -> Pow2Grid | AffineGrid:
        return self.grid

    def grid_of_output(self) -> Pow2Grid | AffineGrid:
        return self.grid


class OperandGrids(AnyDialect):
    """A layer of two or more operands, each on its own grid (`input_grids`), the output on `output_grid`; TF2IR names
    its operands by producer (`input0_name`, `input1_name`: previous_layer lists them in the order they were processed),
    the tflite_int8 dialect's previous_layer is the operator's inputs in order."""

    def grid_of_input(self, position: int) -> Pow2Grid | AffineGrid:
        return self.input_grids[position]

    def grid_of_output(self) -> Pow2Grid | AffineGrid:
        return self.output_grid

    def operands(self) -> tuple[str, ...]:
        return (self.input0_name, self.input1_name) if self.on_pow2_grids else tuple(self.previous_layer)


class InputOutputShape:
    """One image's `input_shape` and `output_shape`, each given as it is (reshape, transpose)."""

    def shape_of_output(self) -> tuple[int, ...]:
        return tuple(self.output_shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return tuple(self.input_shape)


class InputOutputGrids(AnyDialect):
    """One input on `input_grid`, the output on `output_grid`."""

    def grid_of_input(self, position: int) -> Pow2Grid | AffineGrid:
        return self.input_grid

    def grid_of_output(self) -> Pow2Grid | AffineGrid:
        return self.output_grid


INPUT_GRID, OUTPUT_GRID = GridKeys("input_log2scale", "input_scale", "input_zero_point"), GridKeys("output_log2scale")


def omitted_when(default: Any, dialect: str | None = None):
    """A field the JSON (of `dialect` only, when given) carries only when it differs from `default` (absent means
    default)."""
    return dataclasses.field(default=default, metadata={"omit_default": True if dialect is None else dialect})


def omits_default(spec: dataclasses.Field, dialect: str) -> bool:
    """Whether `dialect`'s JSON leaves the field out when it holds its default."""
    omit = spec.metadata.get("omit_default")
    return omit is True or omit == dialect


def optional(default: Any):
    """A field always written but optional in the schema: IRs that predate it read as `default`."""
    return dataclasses.field(default=default, metadata={"optional": True})


@dataclass(frozen=True)
class OpSchema:
    """What an operation's record says of itself in the IR's JSON Schema (core/ir/schema.py builds
    it): its description, the TF2IR version that added it (None: seed 000's own), and the
    definitions of the fields only it has or means otherwise (the others: core/ir/fields.py).
    An AnyDialect record's description and version may differ by dialect: a dict by dialect; so may a
    field's definition (`fields_in`: dialect -> field -> definition, before `fields`)."""

    doc: str | dict[str, str]
    since: str | None | dict[str, str | None] = None
    fields: dict[str, dict] = dataclasses.field(default_factory=dict)
    fields_in: dict[str, dict[str, dict]] = dataclasses.field(default_factory=dict)

    def definition(self, key: str, dialect: str) -> dict | None:
        return self.fields_in.get(dialect, {}).get(key, self.fields.get(key))

    def in_dialect(self, attribute: str, dialect: str):
        value = getattr(self, attribute)
        return value[dialect] if isinstance(value, dict) else value


_NESTED = (Size, Padding)


@dataclass(frozen=True, kw_only=True)
class IrLayer:
    """One IR layer. Subclasses set `operation` and declare the operation's keys as fields."""

    operation: ClassVar[str]
    schema: ClassVar[OpSchema]
    dialects: ClassVar[tuple[str, ...]] = (BASE_DIALECT,)
    label_prefix: ClassVar[str] = ""  # a short name for pictures ("conv", "dw", ...)
    # computes the same thing on any data layout (every output element from the input
    # elements at its position): may run on packed data (seed 004 [0048])
    elementwise: ClassVar[bool] = False

    name: str
    previous_layer: tuple[str, ...]
    next_layer: tuple[str, ...]

    @property
    def dialect(self) -> str:
        """The dialect the record belongs to: TF2IR's own, or a scheme's extension (core/ir/op.py: DIALECTS); an
        AnyDialect record's is its grid's."""
        return self.dialects[0]

    # --- JSON ---------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"operation": self.operation}
        if len(self.dialects) > 1 and self.dialect != BASE_DIALECT:
            data[DIALECT_KEY] = self.dialect
            if self.activation_bits != DEFAULT_BITS:
                data[BITS_KEY] = self.activation_bits
        for spec in json_fields(type(self), self.dialect):
            value = getattr(self, spec.name)
            if "grid" in spec.metadata:
                data.update(spec.metadata["grid"].write(value))
            elif not (omits_default(spec, self.dialect) and value == spec.default):
                data[spec.name] = _plain(value)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        name = data.get("name", "?")
        if data.get("operation") != cls.operation:
            raise IrError(f"layer {name}: operation {data.get('operation')!r}, expected {cls.operation!r}")
        dialect = data.get(DIALECT_KEY, BASE_DIALECT) if len(cls.dialects) > 1 else cls.dialects[0]
        if dialect not in cls.dialects:
            raise IrError(f"layer {name}: {DIALECT_KEY} {dialect!r}; {cls.operation} is of {', '.join(cls.dialects)}")
        values, known = {}, {"operation", *([DIALECT_KEY] if len(cls.dialects) > 1 else [])}
        if dialect != BASE_DIALECT:
            known.add(BITS_KEY)
            if data.get(BITS_KEY, DEFAULT_BITS) not in INTEGER_TYPES:
                raise IrError(f"layer {name} ({cls.operation}): {BITS_KEY} {data.get(BITS_KEY)!r}; the tflite_int8 dialect's "
                              "activations are int8 (no key) or int16 (16)")
        for spec in json_fields(cls, dialect):
            keys = spec.metadata["grid"].keys(dialect) if "grid" in spec.metadata else (spec.name,)
            known.update(keys)
            missing = [key for key in keys if key not in data]
            if missing and (spec.default is dataclasses.MISSING or "grid" in spec.metadata):
                raise IrError(f"layer {name} ({cls.operation}): missing {missing[0]}")
            if "grid" in spec.metadata:
                values[spec.name] = spec.metadata["grid"].read(data, dialect)
            elif not missing:
                values[spec.name] = _typed(data[spec.name], _field_types(cls)[spec.name], f"layer {name}: {spec.name}")
        unknown = sorted(set(data) - known)
        if unknown:
            raise IrError(f"layer {name} ({cls.operation}): unknown key {unknown[0]!r}")
        return cls(**values)

    # --- what every consumer asks ---------------------------------------------------------------
    def operands(self) -> tuple[str, ...]:
        """The producers of the operation's inputs, in the operation's order (what its kernel and
        emitters take). previous_layer lists them in the order they were processed (seed 000,
        5.5), which can differ: an operation with several inputs names them in its fields."""
        return tuple(self.previous_layer)

    def shape_of_output(self) -> tuple[int, ...]:
        """One image's output shape (HWC, or a reshape's shape)."""
        raise NotImplementedError(f"{type(self).__name__}.shape_of_output")

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        """One image's shape of the operand at `position` (operands() order)."""
        raise NotImplementedError(f"{type(self).__name__}.shape_of_input")

    def log2scale_of_input(self, position: int) -> int:
        """The log2scale the layer expects on its operand at `position` (operands() order)."""
        raise NotImplementedError(f"{type(self).__name__}.log2scale_of_input")

    def log2scale_of_output(self) -> int:
        """The log2scale of the layer's output."""
        raise NotImplementedError(f"{type(self).__name__}.log2scale_of_output")

    def grid_of_input(self, position: int) -> Pow2Grid | AffineGrid:
        """What the operand at `position` means in real units (the network input is quantized by it)."""
        return Pow2Grid(self.log2scale_of_input(position))

    def grid_of_output(self) -> Pow2Grid | AffineGrid:
        return Pow2Grid(self.log2scale_of_output())

    # Each operation answers these itself, even where the answer is "none": a new operation that
    # forgot one fails loudly instead of skipping a legality check with a default.
    def macs(self) -> int:
        """Multiply-accumulates of one inference."""
        raise NotImplementedError(f"{type(self).__name__}.macs")

    def shifts(self) -> list[Shift]:
        """Every shift the layer's arithmetic needs (the target's shifters must encode each)."""
        raise NotImplementedError(f"{type(self).__name__}.shifts")

    def accumulator_bound(self, params: dict | None = None) -> int | None:
        """The largest |accumulator| (sums, bias, rounding) for any int8 input, with `params`
        (None: for any int8 weights and bias); None for a layer without accumulators."""
        raise NotImplementedError(f"{type(self).__name__}.accumulator_bound")

    def fused_operators(self) -> list[str]:
        """The quantized operators the layer stands for (seed 004 [0045])."""
        raise NotImplementedError(f"{type(self).__name__}.fused_operators")

    def with_lanes(self, channels: int) -> "IrLayer":
        """This element-wise layer over `channels` values per pixel instead of its own (run on
        packed data, padding lanes included: seed 004 [0048]). Only `elementwise` records answer."""
        raise NotImplementedError(f"{type(self).__name__}.with_lanes: {self.operation} is not element-wise")

    def label(self) -> str:
        return self.label_prefix or self.operation

    @property
    def activation_bits(self) -> int:
        """The width of the layer's activations: 8 (a record of both dialects: its grid's, 16 in TFLite's 16x8 mode)."""
        return DEFAULT_BITS

    @property
    def integer_dtype(self) -> type:
        """The NumPy type of the layer's output integers: int8, or int16 (TFLite's 16x8 mode)."""
        return INTEGER_TYPES[self.activation_bits]


def json_fields(record: type, dialect: str) -> list[dataclasses.Field]:
    """The record's fields a layer of `dialect` writes in its JSON."""
    return [spec for spec in dataclasses.fields(record) if spec.metadata.get("written_in", dialect) == dialect]


@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {spec.name: hints[spec.name] for spec in dataclasses.fields(cls)}


def _plain(value: Any) -> Any:
    if isinstance(value, _NESTED):
        return {spec.name: getattr(value, spec.name) for spec in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


def _typed(value: Any, kind: Any, where: str) -> Any:
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:  # X | None: X's, or None
        (kind, *_) = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        if value is None:
            return None
    if kind in _NESTED:
        if not isinstance(value, dict):
            raise IrError(f"{where}: expected an object, got {value!r}")
        names = [spec.name for spec in dataclasses.fields(kind)]
        if sorted(value) != sorted(names):
            raise IrError(f"{where}: expected the keys {', '.join(names)}, got {', '.join(sorted(value))}")
        return kind(**{name: int(value[name]) for name in names})
    if typing.get_origin(kind) is tuple:
        if not isinstance(value, (list, tuple)):
            raise IrError(f"{where}: expected a list, got {value!r}")
        (item_kind, *_) = typing.get_args(kind)
        return tuple(_typed(item, item_kind, where) for item in value)
    return value
