"""The constraints an accelerator's pattern may state (as Vela's `constraint_*` checks): each kind is one object that
says which IR records carry what it reads, how its value is read from the `accelerator:` section and written back,
and the check, whose text is the refusal the partition report gives. The section's schema (PatternSpec), its reader
and the partitioner all ask CONSTRAINTS; a new kind is one entry here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Optional

from core.ir.activations import ACTIVATIONS
from core.ir.records import IrLayer, json_fields
from core.ir.window import NO_DILATION


@dataclass
class KernelLimitSpec:
    height: int
    width: int


def _fields_of(record: type, dialect: str) -> set[str]:
    """The fields a layer of `record` has in `dialect` (one record of both dialects has each one's)."""
    return {spec.name for spec in json_fields(record, dialect)}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Constraint:
    """One kind of pattern constraint, stated under `key`; a null value is no constraint.

    spec_type: its value's type in the section's structured config.
    applies_to(record type, dialect): whether a record of the dialect carries what it reads (a pattern stating it for
        another operation is refused when the description is read).
    read(reader, value, where): the checked value from plain data (`reader`: core/backends/accel/target.py's).
    refusal(value, layer): why the layer breaks it, or None when the layer meets it.
    plain(value): the value as the description writes it."""

    key: str
    spec_type: Any
    applies_to: Callable[[type, str], bool]
    read: Callable[[Any, Any, str], Any]
    refusal: Callable[[Any, IrLayer], str | None]
    plain: Callable[[Any], Any] = _plain


def _activation_refusal(allowed: tuple[str, ...], layer: IrLayer) -> str | None:
    if getattr(layer, "activation_type", None) in allowed:
        return None
    return f"activation {getattr(layer, 'activation_type', '(none: the layer clamps to output_min/output_max)')} not in {list(allowed)}"


def _kernel_refusal(limit: tuple[int, int], layer: IrLayer) -> str | None:
    kernel = layer.kernel_size.pair()
    if kernel[0] > limit[0] or kernel[1] > limit[1]:
        return f"kernel {kernel[0]}x{kernel[1]} exceeds max_kernel {limit[0]}x{limit[1]}"
    return None


def _stride_refusal(allowed: tuple[int, ...], layer: IrLayer) -> str | None:
    stride = layer.stride.pair()
    # along an axis with one output position (a global pool) the stride is never applied
    if any(s not in allowed and out > 1 for s, out in zip(stride, layer.output_size.pair())):
        return f"stride {stride[0]}x{stride[1]} not in strides {list(allowed)}"
    return None


def _padding_refusal(allowed: bool, layer: IrLayer) -> str | None:
    if allowed is False and layer.padding.any():
        return f"padding {layer.padding.as_list()} unsupported (padding: false)"
    return None


def _dilation_refusal(allowed: bool, layer: IrLayer) -> str | None:
    dilation = getattr(layer, "dilations", NO_DILATION).pair()
    if allowed is False and dilation != (1, 1):
        return f"dilation {dilation[0]}x{dilation[1]} unsupported (dilation: false)"
    return None


def _window_refusal(required: bool, layer: IrLayer) -> str | None:
    if required and layer.window.taps & (layer.window.taps - 1):
        return f"window of {layer.window.taps} elements is not a power of two (pow2_window: the mean must be a shift)"
    return None


def _read_kernel(reader, value: Any, where: str) -> tuple[int, int]:
    kernel = reader.mapping(value, where, required=("height", "width"))
    return reader.integer(kernel["height"], f"{where}.height", minimum=1), reader.integer(kernel["width"], f"{where}.width", minimum=1)


def _read_strides(reader, value: Any, where: str) -> tuple[int, ...]:
    return tuple(reader.integer(v, f"{where}[{i}]", minimum=1) for i, v in enumerate(reader.sequence(value, where, minimum=1)))


def _read_boolean(reader, value: Any, where: str) -> bool:
    return reader.boolean(value, where)


def _carries(field_name: str) -> Callable[[type, str], bool]:
    return lambda record, dialect: field_name in _fields_of(record, dialect)


CONSTRAINTS: dict[str, Constraint] = {constraint.key: constraint for constraint in (
    Constraint("activations", list[str], _carries("activation_type"),
               lambda reader, value, where: tuple(reader.names(value, where, tuple(ACTIVATIONS), minimum=1)), _activation_refusal),
    Constraint("max_kernel", KernelLimitSpec, _carries("kernel_size"), _read_kernel, _kernel_refusal,
               lambda value: {"height": value[0], "width": value[1]}),
    Constraint("strides", list[int], _carries("stride"), _read_strides, _stride_refusal),
    Constraint("padding", bool, _carries("padding"), _read_boolean, _padding_refusal),  # false: only unpadded windows
    Constraint("dilation", bool, _carries("dilations"), _read_boolean, _dilation_refusal),  # false: only dilation 1
    # true: the window's element count is a power of two (the mean is a shift)
    Constraint("pow2_window", bool, lambda record, dialect: getattr(record, "averages", False), _read_boolean, _window_refusal),
)}


# the Hydra structured config of one pattern: its name, the operations it fuses, and each constraint, null by default
PatternSpec = dataclasses.make_dataclass(
    "PatternSpec", [("name", str), ("operations", list[str]),
                    *((key, Optional[constraint.spec_type], dataclasses.field(default=None)) for key, constraint in CONSTRAINTS.items())])
PatternSpec.__doc__ = "One fused pattern an accelerator runs; a null constraint is no constraint (core/backends/accel/constraints.py)."
PatternSpec.__module__ = __name__
