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
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from core.quantize.grid import AffineGrid, Pow2Grid


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
        return [self.top, self.bottom, self.left, self.right]


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


class ScaleSharingCopy:
    """A layer that moves values without arithmetic (reshape, pad, crop): one `log2scale` for its input and
    output, no multiply-accumulates, no shifts, no accumulator."""

    def log2scale_of_input(self, position: int) -> int:
        return self.log2scale

    def log2scale_of_output(self) -> int:
        return self.log2scale

    def macs(self) -> int:
        return 0

    def shifts(self) -> list["Shift"]:
        return []

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # a copy


def omitted_when(default: Any):
    """A field the JSON carries only when it differs from `default` (absent means default)."""
    return dataclasses.field(default=default, metadata={"omit_default": True})


def optional(default: Any):
    """A field always written but optional in the schema: IRs that predate it read as `default`."""
    return dataclasses.field(default=default, metadata={"optional": True})


@dataclass(frozen=True)
class OpSchema:
    """What an operation's record says of itself in the IR's JSON Schema (core/ir/schema.py builds
    it): its description, the TF2IR version that added it (None: seed 000's own), and the
    definitions of the fields only it has or means otherwise (the others: core/ir/fields.py)."""

    doc: str
    since: str | None = None
    fields: dict[str, dict] = dataclasses.field(default_factory=dict)


_NESTED = (Size, Padding)


@dataclass(frozen=True, kw_only=True)
class IrLayer:
    """One IR layer. Subclasses set `operation` and declare the operation's keys as fields."""

    operation: ClassVar[str]
    schema: ClassVar[OpSchema]
    # the dialect the record belongs to: TF2IR's own, or a scheme's extension (core/ir/op.py: DIALECTS)
    dialect: ClassVar[str] = "tf2ir"
    label_prefix: ClassVar[str] = ""  # a short name for pictures ("conv", "dw", ...)
    # computes the same thing on any data layout (every output element from the input
    # elements at its position): may run on packed data (seed 004 [0048])
    elementwise: ClassVar[bool] = False

    name: str
    previous_layer: tuple[str, ...]
    next_layer: tuple[str, ...]

    # --- JSON ---------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"operation": self.operation}
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            if spec.metadata.get("omit_default") and value == spec.default:
                continue
            data[spec.name] = _plain(value)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "IrLayer":
        name = data.get("name", "?")
        if data.get("operation") != cls.operation:
            raise IrError(f"layer {name}: operation {data.get('operation')!r}, expected {cls.operation!r}")
        values = {}
        for spec, kind in _field_types(cls):
            if spec.name not in data:
                if spec.default is dataclasses.MISSING:
                    raise IrError(f"layer {name} ({cls.operation}): missing {spec.name}")
                continue
            values[spec.name] = _typed(data[spec.name], kind, f"layer {name}: {spec.name}")
        unknown = sorted(set(data) - {spec.name for spec in dataclasses.fields(cls)} - {"operation"})
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


@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> tuple[tuple[dataclasses.Field, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((spec, hints[spec.name]) for spec in dataclasses.fields(cls))


def _plain(value: Any) -> Any:
    if isinstance(value, _NESTED):
        return {spec.name: getattr(value, spec.name) for spec in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


def _typed(value: Any, kind: Any, where: str) -> Any:
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
