"""Activations fused into a layer (the IR's `activation_type`): each one is the clamp it
applies to the layer's int8 result. An activation is registered by its folder in
core/ir/ops/ (relu6/, relu/); "None" (saturation to int8 only) is built in.

Because the clamp is applied after the requantizing shift, and rounding is monotone, it is
exactly the float activation followed by the output's FakeQuant (seed 000)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from core.frontend.layers import GraphIndex, Layer
from core.ir.fixedpoint import INT8_MAX, INT8_MIN
from core.ir.records import IrError


@dataclass(frozen=True)
class Activation:
    name: str  # the IR's activation_type
    tf_ops: tuple[str, ...]  # graph ops fused into the layer before them
    fused_operator: str | None  # seed 004's name for it in a fused group; None: nothing fused
    lower: Callable[[int], int]  # output log2scale -> the lowest int8 result
    upper: Callable[[int], int]  # output log2scale -> the highest int8 result

    def clamp(self, output_log2scale: int) -> tuple[int, int]:
        """[low, high] of the layer's int8 output: the activation's range, within int8."""
        return max(INT8_MIN, self.lower(output_log2scale)), min(INT8_MAX, self.upper(output_log2scale))


NO_ACTIVATION = Activation("None", (), None, lambda log2scale: INT8_MIN, lambda log2scale: INT8_MAX)
ACTIVATIONS: dict[str, Activation] = {NO_ACTIVATION.name: NO_ACTIVATION}


class Activated:
    """What a layer with a fused activation (activation_type, applied at output_log2scale) knows of it."""

    def clamp(self) -> tuple[int, int]:
        """The int8 range of the output: the activation's, at the output scale."""
        return activation_named(self.activation_type, f"layer {self.name}: ").clamp(self.log2scale_of_output())

    def activation_operators(self) -> list[str]:
        """The activation among seed 004's fused operators ([] for none)."""
        fused = activation_named(self.activation_type).fused_operator
        return [fused] if fused else []


def register_activation(activation: Activation) -> Activation:
    if activation.name in ACTIVATIONS:
        raise ValueError(f"activation {activation.name!r} registered twice")
    ACTIVATIONS[activation.name] = activation
    return activation


def activation_named(name: str, where: str = "") -> Activation:
    """The activation the IR calls `name`; IrError naming the choices otherwise."""
    if name not in ACTIVATIONS:
        raise IrError(f"{where}activation_type {name!r} is not in the IR (one of {', '.join(ACTIVATIONS)})")
    return ACTIVATIONS[name]


def activation_for_tf_op(op: str) -> Activation | None:
    """The activation a graph op fuses as, if any."""
    return next((activation for activation in ACTIVATIONS.values() if op in activation.tf_ops), None)


def absorb_activation(layer: Layer, index: GraphIndex) -> None:
    """Fuse into `layer` the activation that is the only reader of its output, if any."""
    reader = index.sole_reader(layer.output)
    activation = activation_for_tf_op(reader.op) if reader is not None else None
    if activation is not None:
        layer.activation = activation.name
        layer.output = f"{reader.name}:0"
        layer.nodes.append(reader.name)
