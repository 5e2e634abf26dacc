"""An IR: its typed layers in execution order and their int8 constants."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.quantize.grid import AffineGrid, IndexGrid, Pow2Grid
from core.ir.op import DIALECT_KEY, DIALECTS, END_POINT, NETWORK_INPUT, dialect_of, is_network_input
from core.ir.ops import OPS  # noqa: F401  (every operation registered)
from core.ir.records import IrError, IrLayer


def record_from_json(data: dict[str, Any]) -> IrLayer:
    """A JSON layer as its operation's typed record, in its dialect."""
    name = data.get("name", "?") if isinstance(data, dict) else "?"
    dialect = dialect_of(data)
    if dialect not in DIALECTS:
        raise IrError(f"layer {name}: {DIALECT_KEY} {dialect!r} is not one of {', '.join(DIALECTS)}")
    operation = data.get("operation") if isinstance(data, dict) else None
    if operation not in DIALECTS[dialect]:
        raise IrError(f"layer {name}: operation {operation!r} is not one of the {dialect} dialect's: {', '.join(DIALECTS[dialect])}")
    return DIALECTS[dialect][operation].record.from_json(data)


@dataclass
class Ir:
    layers: list[IrLayer]  # in execution order
    params: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # layer -> kind -> int8 constants

    @classmethod
    def from_json(cls, layers: list[dict[str, Any]], params: dict[str, dict[str, np.ndarray]] | None = None) -> "Ir":
        return cls([record_from_json(layer) for layer in layers], dict(params or {}))

    def to_json(self) -> list[dict[str, Any]]:
        return [layer.to_json() for layer in self.layers]

    @property
    def dialect(self) -> str:
        """The dialect of every layer (an IR is of one)."""
        dialects = {layer.dialect for layer in self.layers}
        if len(dialects) != 1:
            raise IrError(f"the IR mixes the dialects {sorted(dialects)}; each IR is of one")
        return dialects.pop()

    def layer(self, name: str) -> IrLayer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"no layer {name!r} in the IR")

    @property
    def end_point_layers(self) -> list[str]:
        return [layer.name for layer in self.layers if END_POINT in layer.next_layer]

    @property
    def network_inputs(self) -> list[str]:
        """The network inputs' names ("input", or each of several: core/ir/op.py: network_input_name), in the order the
        layers first read them: the order the generated program's input holds them in."""
        names = [name for layer in self.layers for name in layer.previous_layer if is_network_input(name)]
        return list(dict.fromkeys(names))

    def readers_of_input(self, name: str | None = None) -> list[tuple[IrLayer, int]]:
        """(layer, position) of every input that is the network input `name` (default: the network's one input)."""
        name = name or self._one_input()
        return [(layer, position) for layer in self.layers for position, operand in enumerate(layer.operands()) if operand == name]

    def _one_input(self) -> str:
        inputs = self.network_inputs
        if len(inputs) != 1:
            raise IrError(f"the IR has {len(inputs)} network inputs ({', '.join(inputs)}); name the one meant")
        return inputs[0]

    @property
    def input_log2scale(self) -> int:
        """The network input's log2scale, as the layers that read it declare it."""
        values = {layer.log2scale_of_input(position) for layer, position in self.readers_of_input()}
        if len(values) != 1:
            raise IrError(f"the layers reading the network input disagree on its log2scale: {sorted(values)}")
        return values.pop()

    @property
    def input_grid(self) -> Pow2Grid | AffineGrid | IndexGrid:
        """How the network's one input maps to integers, as the layers that read it declare it."""
        return self.grid_of_network_input()

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One image of the network's one input (HWC), as the layers that read it declare it."""
        return self.shape_of_network_input()

    def grid_of_network_input(self, name: str | None = None) -> Pow2Grid | AffineGrid | IndexGrid:
        """How the network input `name` (default: the one) maps to integers, as the layers that read it declare it."""
        grids = {layer.grid_of_input(position) for layer, position in self.readers_of_input(name)}
        if len(grids) != 1:
            raise IrError(f"the layers reading the network input {name or NETWORK_INPUT} disagree on its quantization: "
                          f"{sorted(map(str, grids))}")
        return grids.pop()

    def shape_of_network_input(self, name: str | None = None) -> tuple[int, ...]:
        """One sample of the network input `name` (default: the one), as the layers that read it declare it."""
        shapes = {layer.shape_of_input(position) for layer, position in self.readers_of_input(name)}
        if len(shapes) != 1:
            raise IrError(f"the layers reading the network input {name or NETWORK_INPUT} disagree on its shape: {sorted(shapes)}"
                          if shapes else "no layer reads the network input")
        return shapes.pop()
