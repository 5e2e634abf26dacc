"""The IR operation interface and its registry.

An `IrOp` is everything the toolchain knows of one operation: the graph patterns that
start its layers, its annotate rule (seed 001), its typed record (core/ir/records.py), how a
matched layer becomes that record under a calibration table (`fields`, `params`), how an
operator of a .tflite model does (`builders`), and the integer kernel the simulator runs. An
operation whose record is of both dialects (records.AnyDialect) is registered once, for both.
Each operation's folder in core/ir/ops/ builds and registers its IrOps; backends keep their own
registries of how they emit each operation, under its name.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from core.frontend.graph import Graph, canonical_tensor, tensor_node
from core.frontend.layers import AnnotateRule, Layer, LayerGraph, Pattern
from core.ir.records import BASE_DIALECT, DIALECT_KEY, IrError, IrLayer
from core.quantize.grid import power_of_two_log2scale

NETWORK_INPUT = "input"  # previous_layer's name for the network input (seed 000, 4.1)


def network_input_name(model_name: str | None = None) -> str:
    """previous_layer's name for a network input: "input" (seed 000, 4.1) for a network of one; `input:<name>` for each
    input of a network of several, named as the model names it (every character but letters, digits and _ made _)."""
    return NETWORK_INPUT if model_name is None else f"{NETWORK_INPUT}:{re.sub(r'[^A-Za-z0-9_]', '_', model_name)}"


def is_network_input(name: str) -> bool:
    return name == NETWORK_INPUT or name.startswith(f"{NETWORK_INPUT}:")


def input_names(graph: Graph) -> dict[str, str]:
    """Each input tensor of `graph` -> its IR name (network_input_name), in the model's order."""
    if len(graph.input_tensors) == 1:
        return {canonical_tensor(graph.input_tensors[0]): NETWORK_INPUT}
    return {canonical_tensor(tensor): network_input_name(tensor_node(tensor)) for tensor in graph.input_tensors}
END_POINT = "endpoint"  # next_layer's name for "leaves the network"


@dataclass
class IrContext:
    """What an op needs to describe a layer in the IR: shapes, producers, readers, and the
    scales calibration chose."""

    layer_graph: LayerGraph  # the folded float graph and its layers
    table: Any  # core.quantize.table.CalibrationTable, power-of-two target
    min_shift: int = 0
    max_shift: int = 31

    def __post_init__(self):
        self._readers: dict[str, list[Layer]] = {}
        for layer in self.layer_graph.layers:
            for tensor in dict.fromkeys(layer.inputs):
                self._readers.setdefault(tensor, []).append(layer)
        self.order, self._previous = self._traverse()

    def _traverse(self) -> tuple[list[Layer], dict[str, list[str]]]:
        """The layers in the order of seed 000, 5.3, and each one's previous_layer as 5.5 records it.

        A layer is processed when it is, of the discovered ones, the last (from the end of the
        list) whose inputs are all ready; processing it makes its output ready, records it as a
        previous layer of each of its readers (so previous_layer lists producers in the order
        they were processed, the network input first) and discovers those readers. Readers come
        in graph order. Unlike the original tool, the readers of an end point are followed too
        (its next_layer still says "endpoint"), so no layer is ever left out."""
        inputs = input_names(self.graph)
        ready, order, discovered = set(inputs), [], []
        previous: dict[str, list[str]] = {}
        for tensor, name in inputs.items():
            self._discover(tensor, name, previous, discovered, order)
        while discovered:
            position = next((i for i in range(len(discovered) - 1, -1, -1)
                             if all(tensor in ready for tensor in discovered[i].inputs)), None)
            if position is None:
                raise IrError(f"layers {[layer.ir_name for layer in discovered]} wait on tensors no layer produces")
            layer = discovered.pop(position)
            order.append(layer)
            ready.add(layer.output)
            self._discover(layer.output, layer.ir_name, previous, discovered, order)
        missing = [layer.ir_name for layer in self.layer_graph.layers if layer not in order]
        if missing:
            raise IrError(f"layers {missing} are not reached from the network input")
        return order, previous

    def _discover(self, tensor: str, producer: str, previous: dict, discovered: list, processed: list) -> None:
        for reader in self._readers.get(tensor, []):
            previous.setdefault(reader.ir_name, []).extend(producer for _ in range(reader.inputs.count(tensor)))
            if reader not in discovered and reader not in processed:
                discovered.append(reader)

    def previous_layers(self, layer: Layer) -> list[str]:
        """previous_layer: the producers in the order they were processed (seed 000, 5.5)."""
        return list(self._previous[layer.ir_name])

    @property
    def graph(self) -> Graph:
        return self.layer_graph.graph

    def scale_source(self, tensor: str) -> str:
        return self.layer_graph.scale_source(tensor)

    def producer_name(self, tensor: str) -> str:
        """The IR name of the layer producing `tensor`; "input" for the network input (seed 000, 4.1), a network input's
        name (network_input_name) for each of several."""
        inputs = input_names(self.graph)
        if canonical_tensor(tensor) in inputs:
            return inputs[canonical_tensor(tensor)]
        producer = self.layer_graph.producer_of(canonical_tensor(tensor))
        if producer is None:
            raise IrError(f"tensor {tensor} is produced by no IR layer and is not the network input")
        return producer.ir_name

    def next_layers(self, layer: Layer) -> list[str]:
        """next_layer: the layers reading the output, or ["endpoint"] for an end point (whose
        readers, if any, are not followed, like the original tool)."""
        if layer.output in set(self.graph.end_points):
            return [END_POINT]
        readers = [reader.ir_name for reader in self._readers.get(layer.output, [])]
        if not readers:
            raise IrError(f"layer {layer.ir_name}: its output {layer.output} is read by no layer and is not an end point")
        return readers

    def log2scale(self, tensor: str) -> int:
        """The log2scale of an activation tensor, or of a constant ('const:0')."""
        entry = self.table.entry(self.scale_source(tensor))
        log2scale = power_of_two_log2scale(entry.grid)
        if log2scale is None:
            raise IrError(f"tensor {tensor} has no power-of-two scale (target {self.table.target}); the IR needs target=tf2ir")
        return log2scale

    def weight(self, layer: Layer) -> np.ndarray:
        """The float values of the layer's weight Const (a conv's filter, a table, a constant's values)."""
        if layer.weight is None:
            raise IrError(f"layer {layer.ir_name} ({layer.op}): no Const holds its weight")
        return np.asarray(self.graph.constants[layer.weight])

    def nhwc(self, layer: Layer, field_name: str, tensor: str, flat: bool = False) -> list[int]:
        """The NHWC shape of `tensor`, every dimension but the batch known, else an IrError.
        `flat`: an [N, C] tensor is the [N, 1, 1, C] image, tokens [N, L, C] the [N, 1, L, C] one (the same bytes)."""
        shape = self.graph.shape(tensor)
        if flat and shape is not None and len(shape) in (2, 3):
            shape = [shape[0], *[1] * (4 - len(shape)), *shape[1:]]
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
                f"[{self.min_shift}, {self.max_shift}] (target.scheme.min_shift / target.scheme.max_shift); "
                f"recalibrate (e.g. another calib.method or calib.pow2_rounding) or widen the target's range"
            )
        return value


Fields = Callable[[Layer, IrContext], dict]
Params = Callable[[Layer, IrContext], dict]
Kernel = Callable[[Any, dict, list], np.ndarray]
Builder = Callable[[Any, Any, Any], tuple[dict, dict]]  # (model, operator, runtime) -> (fields, params)


def no_params(layer: Layer, ctx: IrContext) -> dict:
    return {}


@dataclass(frozen=True)
class IrOp:
    """One IR operation.

    fields(layer, ctx): the record's operation keys (all but name, operation, previous_layer,
        next_layer) as JSON values, for a matched layer under ctx's calibration table.
    params(layer, ctx): its int8 constants by kind (param_kinds: "weight", "bias", "table") in the
        IR's layouts.
    kernel(record, params, inputs): the int8 output for int8 NHWC input batches (`inputs` in the
        record's operands() order), exactly as the hardware computes it: the reference path.
    fast_kernel: the same integers by a faster route where a bound proves it exact (compiled
        integer loops), which the simulator runs; None where the reference is the fast one.
        Tests compare the two on every operation and on real models.
    input_kinds: the .npy names of its inputs in the IR's test tensors (input_kind).
    float_variant: the operation a layer of this one becomes when calibration keeps it in float
        (calib.keep_float: the table's float_layers), or None if it cannot be kept in float.
    builders: per TFLite builtin operator, how an operator of a .tflite model (core/frontend/tflite.py)
        becomes the record's fields and constants in the tflite_int8 dialect, deriving every integer
        parameter as TFLite's Prepare does and computing as the runtime (core/quantize/runtimes.py) computes.
    activation_widths: the widths of the activations its kernel and its C compute: 8, and 16 where TFLite's 16x8 mode's
        arithmetic of it is built (a 16x8 operator of another operation is refused naming it).
    builder_widths: per TFLite builtin operator, its widths where they are not activation_widths (an element-wise
        operation may have int16 arithmetic for LOGISTIC and not for GELU).
    tf2ir_form: a matched layer as the TF2IR dialect holds it, where this operation's TF2IR record cannot hold every
        layer of it exactly and another operation's can (a depthwise conv of channel multiplier above 1: the conv of its
        block-diagonal weight); None where its record holds them all.
    constant_operands: its TFLite operators read a constant operand as an activation (a ViT's class token, its position
        embedding): the reader makes each one a layer of the constant operation, which the builder reads as computed.
    elementwise: where each output element is a function of the inputs' elements at its index (broadcast), that
        function as integer steps, `(builder, record) -> output` on a builder's inputs (core/frontend/layers.py:
        IntegerModelBuilder; add's `record_add`): the C backend renders it per element and the accelerator on its ALU
        wherever the operation has no emitter or lowering of its own, so such an operation needs no backend file."""

    name: str
    record: type[IrLayer]
    annotate: AnnotateRule
    patterns: tuple[Pattern, ...]
    fields: Fields
    kernel: Kernel
    params: Params = no_params
    input_kinds: tuple[str, ...] = ("input",)
    # the kinds `params` returns: params/<layer>_<kind>.npy; by dialect where the dialects' differ
    param_kinds: tuple[str, ...] | dict[str, tuple[str, ...]] = ()
    float_variant: str | None = None
    fast_kernel: Kernel | None = None
    builders: dict[str, Builder] = dataclasses.field(default_factory=dict)
    activation_widths: tuple[int, ...] = (8,)
    tf2ir_form: Callable[[Layer, IrContext], Layer] | None = None
    builder_widths: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    constant_operands: bool = False
    elementwise: Callable[..., Any] | None = None  # (builder, its own record) -> output

    @property
    def simulator_kernel(self) -> Kernel:
        return self.fast_kernel or self.kernel

    def widths_of(self, builtin: str) -> tuple[int, ...]:
        """The activation widths the IR computes the TFLite operator `builtin` (one of `builders`) at."""
        return self.builder_widths.get(builtin, self.activation_widths)

    def builders_at(self, bits: int) -> list[str]:
        """The TFLite operators it reads whose arithmetic at `bits` the IR has."""
        return sorted(builtin for builtin in self.builders if bits in self.widths_of(builtin))

    def input_kind(self, position: int, operands: int) -> str:
        """The test tensor name of input `position` of a layer with `operands` inputs: input_kinds', or input0, input1,
        ... for an operation of any number of inputs."""
        return self.input_kinds[position] if len(self.input_kinds) == operands else f"input{position}"

    def describe(self, layer: Layer, ctx: IrContext) -> IrLayer:
        """The layer as its typed IR record, every shift checked against ctx's range."""
        data = {"name": layer.ir_name, "operation": self.name, **self.fields(layer, ctx),
                "previous_layer": ctx.previous_layers(layer), "next_layer": ctx.next_layers(layer)}
        record = self.record.from_json(data)
        for shift in record.shifts():
            ctx.check_shift(record.name, shift.label, shift.amount)
        return record


def loaded_kinds(op: IrOp, layer: dict) -> list[str]:
    """The constant kinds a JSON layer of `op` has files for (params/<layer>_<kind>.npy): the operation's in the layer's
    dialect, less each a `load_<kind>` flag turns off (`load_bias: false`); an absent flag is its record field's default
    (a dialect that does not write it), else on."""
    defaults = {spec.name: spec.default for spec in dataclasses.fields(op.record)}
    kinds = op.param_kinds.get(dialect_of(layer), ()) if isinstance(op.param_kinds, dict) else op.param_kinds
    return [kind for kind in kinds if layer.get(f"load_{kind}", defaults.get(f"load_{kind}", True)) is not False]


OPS: dict[str, IrOp] = {}


# each dialect's operations: those whose record is of it (register_op fills it)
DIALECTS: dict[str, dict[str, IrOp]] = {BASE_DIALECT: {}, "tflite_int8": {}}


def dialect_of(data: dict) -> str:
    """The dialect of a JSON layer."""
    return data.get(DIALECT_KEY, BASE_DIALECT) if isinstance(data, dict) else BASE_DIALECT


def schema_key(operation: str, dialect: str) -> str:
    """The name of an operation's branch of the IR's JSON Schema: the base dialect's (TF2IR's) by its name, another
    dialect's as `operation@dialect` (one record of both dialects has a branch in each)."""
    return operation if dialect == BASE_DIALECT else f"{operation}@{dialect}"


def operation_of(record: IrLayer) -> IrOp:
    """The registered operation of a record."""
    return OPS[record.operation]


def in_tf2ir(layer: Layer, ctx: IrContext) -> Layer:
    """The layer as the TF2IR dialect holds it: its operation's `tf2ir_form` of it, else itself."""
    form = OPS[layer.op].tf2ir_form
    return layer if form is None else form(layer, ctx)


def op_of(layer: Layer, float_layers) -> IrOp:
    """The IR operation of a matched layer: its pattern's, or that operation's float variant when
    the calibration table keeps the layer in float."""
    op = OPS[layer.op]
    if layer.name not in float_layers:
        return op
    if op.float_variant is None:
        kept = sorted(name for name, candidate in OPS.items() if candidate.float_variant)
        raise IrError(f"layer {layer.ir_name} ({layer.op}) cannot be kept in float (calib.keep_float): only {', '.join(kept)} "
                      "layers have a float variant")
    return OPS[op.float_variant]


def register_op(op: IrOp) -> IrOp:
    """Register `op` in every dialect its record is of."""
    if op.name in OPS:
        raise ValueError(f"IR operation {op.name!r} registered twice")
    if op.record.operation != op.name:
        raise ValueError(f"IR operation {op.name!r}: its record is for {op.record.operation!r}")
    if any(pattern.op != op.name for pattern in op.patterns):
        raise ValueError(f"IR operation {op.name!r}: a pattern builds another operation's layers")
    if op.builders and "tflite_int8" not in op.record.dialects:
        raise ValueError(f"IR operation {op.name!r}: builders from .tflite operators go with a record of the tflite_int8 dialect")
    OPS[op.name] = op
    for dialect in op.record.dialects:
        DIALECTS[dialect][op.name] = op
    return op
