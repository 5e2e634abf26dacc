"""The IR operation interface and its registry.

An `IrOp` is everything the toolchain knows of one TF2IR operation: the graph patterns that
start its layers, its annotate rule (seed 001), its typed record (core/ir/records.py), how a
matched layer becomes that record under a calibration table (`fields`, `params`), and the
integer kernel the simulator runs. Each operation's folder in core/ir/ops/ builds and
registers its IrOps; backends keep their own registries of how they emit each operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from core.frontend.graph import Graph, canonical_tensor
from core.frontend.layers import AnnotateRule, Layer, LayerGraph, Pattern
from core.ir.records import IrError, IrLayer

NETWORK_INPUT = "input"  # previous_layer's name for the network input (seed 000, 4.1)
END_POINT = "endpoint"  # next_layer's name for "leaves the network"


@dataclass
class IrContext:
    """What an op needs to describe a layer in the IR: shapes, producers, readers, and the
    scales calibration chose."""

    layer_graph: LayerGraph  # the folded float graph and its layers
    table: Any  # core.quantize.table.CalibrationTable, power-of-two target
    min_shift: int = 0
    max_shift: int = 31
    # the spec maps the image to int8 with this log2scale; a QAT table may leave the input out
    input_log2scale: int = 7

    def __post_init__(self):
        self._readers: dict[str, list[str]] = {}
        for layer in self.layer_graph.layers:
            for tensor in layer.inputs:
                self._readers.setdefault(tensor, []).append(layer.ir_name)

    @property
    def graph(self) -> Graph:
        return self.layer_graph.graph

    def scale_source(self, tensor: str) -> str:
        return self.layer_graph.scale_source(tensor)

    def producer_name(self, tensor: str) -> str:
        """The IR name of the layer producing `tensor`; "input" for the network input (seed 000, 4.1)."""
        if canonical_tensor(tensor) == canonical_tensor(self.graph.input_tensor):
            return NETWORK_INPUT
        producer = self.layer_graph.producer_of(canonical_tensor(tensor))
        if producer is None:
            raise IrError(f"tensor {tensor} is produced by no IR layer and is not the network input")
        return producer.ir_name

    def next_layers(self, layer: Layer) -> list[str]:
        """next_layer: the layers reading the output, or ["endpoint"] for an end point (whose
        readers, if any, are not followed, like the original tool)."""
        if layer.output in set(self.graph.end_points):
            return [END_POINT]
        readers = self._readers.get(layer.output, [])
        if not readers:
            raise IrError(f"layer {layer.ir_name}: its output {layer.output} is read by no layer and is not an end point")
        return readers

    def log2scale(self, tensor: str) -> int:
        """The log2scale of an activation tensor, or of a constant ('const:0')."""
        source = self.scale_source(tensor)
        if source == self.graph.input_tensor and source not in self.table.tensors:
            return self.input_log2scale
        entry = self.table.entry(source)
        if entry.log2scale is None:
            raise IrError(f"tensor {tensor} has no power-of-two scale (target {self.table.target}); the IR needs target=tf2ir")
        return entry.log2scale

    def nhwc(self, layer: Layer, field_name: str, tensor: str) -> list[int]:
        """The NHWC shape of `tensor`, every dimension but the batch known, else an IrError."""
        shape = self.graph.shape(tensor)
        if shape is None or len(shape) != 4 or min(shape[1:]) < 0:
            raise IrError(f"layer {layer.ir_name}: {field_name}: the IR needs an NHWC tensor of known size, got {shape} for {tensor}")
        return [int(v) for v in shape]

    def known_shape(self, layer: Layer, field_name: str, tensor: str, rank: int | None = None) -> list[int]:
        """The shape of `tensor` without its batch dimension, every dimension known."""
        shape = self.graph.shape(tensor)
        if shape is None or len(shape) < 1 or any(d < 0 for d in shape[1:]) or (rank is not None and len(shape) != rank):
            raise IrError(f"layer {layer.ir_name}: {field_name}: the IR needs a{' rank-%d' % rank if rank else ''} tensor of "
                          f"known size, got {shape}")
        return [int(d) for d in shape[1:]]

    def check_shift(self, layer_name: str, label: str, value: int) -> int:
        if not self.min_shift <= value <= self.max_shift:
            raise IrError(
                f"layer {layer_name}: {label} = {value} is outside the target's shift range "
                f"[{self.min_shift}, {self.max_shift}] (target.min_shift / target.max_shift); "
                f"recalibrate (e.g. another calib.method or calib.pow2_rounding) or widen the target's range"
            )
        return value


Fields = Callable[[Layer, IrContext], dict]
Params = Callable[[Layer, IrContext], dict]
Kernel = Callable[[Any, dict, list], np.ndarray]


def no_params(layer: Layer, ctx: IrContext) -> dict:
    return {}


@dataclass(frozen=True)
class IrOp:
    """One IR operation.

    fields(layer, ctx): the record's operation keys (all but name, operation, previous_layer,
        next_layer) as JSON values, for a matched layer under ctx's calibration table.
    params(layer, ctx): its int8 constants by kind ("weight", "bias") in the IR's layouts.
    kernel(record, params, inputs): the int8 output for int8 NHWC input batches (`inputs` in
        previous_layer order), exactly as the hardware computes it.
    input_kinds: the .npy names of its inputs in the IR's test tensors."""

    name: str
    record: type[IrLayer]
    annotate: AnnotateRule
    patterns: tuple[Pattern, ...]
    fields: Fields
    kernel: Kernel
    params: Params = no_params
    input_kinds: tuple[str, ...] = ("input",)

    def describe(self, layer: Layer, ctx: IrContext) -> IrLayer:
        """The layer as its typed IR record, every shift checked against ctx's range."""
        previous = [ctx.producer_name(tensor) for tensor in layer.inputs]
        data = {"name": layer.ir_name, "operation": self.name, **self.fields(layer, ctx),
                "previous_layer": previous, "next_layer": ctx.next_layers(layer)}
        record = self.record.from_json(data)
        for shift in record.shifts():
            ctx.check_shift(record.name, shift.label, shift.amount)
        return record


OPS: dict[str, IrOp] = {}


def register_op(op: IrOp) -> IrOp:
    if op.name in OPS:
        raise ValueError(f"IR operation {op.name!r} registered twice")
    if op.record.operation != op.name:
        raise ValueError(f"IR operation {op.name!r}: its record is for {op.record.operation!r}")
    if any(pattern.op != op.name for pattern in op.patterns):
        raise ValueError(f"IR operation {op.name!r}: a pattern builds another operation's layers")
    OPS[op.name] = op
    return op
