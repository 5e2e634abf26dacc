"""The graph ops an operation's integer model adds to the annotated graph: the builder its
annotate rule's `integer_model` receives (core/frontend/layers.IntegerModelBuilder).

Where an operation's integer arithmetic is not its float op followed by one FakeQuant (add's
two roundings, a lookup table, softmax's integer normalization), the annotated graph computes
its integers with these ops, from the same quantized inputs, so that on a power-of-two target
the annotated graph and the integer simulator agree bit for bit."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from core.frontend.graph import Graph, Node
from core.frontend.layers import Layer

INT8_MIN, INT8_MAX = -128, 127


class Insertions(Protocol):
    def add(self, after: str, node: Node, value: np.ndarray | None = None) -> str: ...


class GraphModelBuilder:
    """Adds nodes under `scope`, right after the node `after` (which follows every input)."""

    def __init__(self, edit: Insertions, after: str, scope: str, graph: Graph, layer: Layer, inputs: list[str],
                 input_log2scales: list[int], output_log2scale: int):
        self.edit, self.after, self.scope = edit, after, scope
        self.graph, self.layer, self.attrs, self.inputs, self.activation = graph, layer, layer.attrs, inputs, layer.activation
        self.input_log2scales, self.output_log2scale = input_log2scales, output_log2scale
        self._dtypes: dict[str, str] = {}  # what this builder made that is not float32
        self._count = 0

    def _name(self, label: str) -> str:
        self._count += 1
        return f"{self.scope}/{label}_{self._count}"

    def _dtype(self, tensor: str) -> str:
        return self._dtypes.get(tensor, "float32")

    def const(self, label: str, value: Any, dtype: str = "float32") -> str:
        array = np.asarray(value, dtype=dtype)
        tensor = self.edit.add(self.after, Node(self._name(label), "Const", [], {"dtype": {"type": dtype}}), array)
        self._dtypes[tensor] = dtype
        return tensor

    def op(self, op: str, inputs: list[str], *, cast_to: str | None = None, keep_dims: bool | None = None) -> str:
        dtype = self._dtype(inputs[0])
        attrs: dict[str, dict] = {"T": {"type": dtype}}
        if op == "Cast":
            if cast_to is None:
                raise ValueError(f"{self.scope}: a Cast of {inputs[0]} names no type to cast to (cast_to)")
            attrs = {"SrcT": {"type": dtype}, "DstT": {"type": cast_to}, "Truncate": {"b": False}}
            dtype = cast_to
        elif op == "GatherV2":
            attrs = {"Tparams": {"type": dtype}, "Tindices": {"type": self._dtype(inputs[1])},
                     "Taxis": {"type": self._dtype(inputs[2])}, "batch_dims": {"i": 0}}
        elif op in ("Sum", "Max", "Min"):
            attrs.update(Tidx={"type": self._dtype(inputs[1])}, keep_dims={"b": bool(keep_dims)})
        tensor = self.edit.add(self.after, Node(self._name(op), op, list(inputs), attrs))
        self._dtypes[tensor] = dtype
        return tensor

    def _scaled(self, tensor: str, log2scale: int) -> str:
        return tensor if log2scale == 0 else self.op("Mul", [tensor, self.const("scale", 2.0**log2scale, self._dtype(tensor))])

    def to_ints(self, tensor: str, log2scale: int) -> str:
        """FakeQuant's integers: x * 2^log2scale rounded half up, saturated (exact on its grid)."""
        rounded = self.op("Floor", [self.op("AddV2", [self._scaled(tensor, log2scale), self.const("half", 0.5)])])
        return self.clamp(rounded, INT8_MIN, INT8_MAX)

    def round_shift(self, tensor: str, shift: int) -> str:
        if shift <= 0:
            return self._scaled(tensor, -shift)
        return self.op("Floor", [self.op("AddV2", [self._scaled(tensor, -shift), self.const("half", 0.5)])])

    def clamp(self, tensor: str, low: int, high: int) -> str:
        dtype = self._dtype(tensor)
        return self.op("Minimum", [self.op("Maximum", [tensor, self.const("low", low, dtype)]), self.const("high", high, dtype)])

    def from_ints(self, tensor: str, log2scale: int) -> str:
        return self._scaled(tensor, -log2scale)

