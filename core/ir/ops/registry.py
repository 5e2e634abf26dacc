"""One home per IR operation.

Each IR operation (conv, dwconv, add, avg_pool, max_pool, reshape, concat2,
resize_bilinear) is one module in core/ops/ that registers an `IrOp`: the
TensorFlow ops that start it, how it matches the folded graph into a `Layer`,
and its quantization-annotation rule (seed 001). Later stages add their pieces
(IR fields, integer kernel, C emitter) to the same module, so adding an op is
one focused change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

from core.frontend.graph import Graph, Node


class QKind(Enum):
    """TVM's QAnnotateKind: what a simulated quantize does to a tensor."""

    INPUT = "input"  # quantized where it is consumed
    WEIGHT = "weight"  # a constant, quantized without saturation
    ACTIVATION = "activation"  # produced in the accumulator's domain; quantized before its next use
    IDENTITY = "identity"  # passes its input's annotation (and scale) through


@dataclass(frozen=True)
class AnnotateRule:
    """How simulated quantization wraps one IR op.

    `inputs` gives the kind required of each activation input; `output` the
    kind of what the op produces. An op whose output kind is IDENTITY shares its
    input's scale (reshape): no quantize is inserted after it."""

    inputs: tuple[QKind, ...]
    output: QKind
    weight: bool = False  # has a quantized weight
    bias: bool = False  # has a quantized bias


@dataclass
class Layer:
    """A group of graph nodes that the IR (and the hardware) executes as one operation."""

    name: str  # the TensorFlow op that defines it (the IR name is this with '/' -> '_')
    op: str  # IR operation name
    inputs: list[str]  # activation tensors read, canonical 'node:0'
    output: str  # the tensor it produces (after any fused activation)
    nodes: list[str]  # every graph node that belongs to it
    weight: str | None = None  # Const node name
    bias: str | None = None  # Const node name
    activation: str = "None"  # "Relu6" | "None"
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def ir_name(self) -> str:
        return self.name.replace("/", "_")


Matcher = Callable[[Graph, Node, "GraphIndex"], Layer]


class IrError(ValueError):
    """A layer the target cannot express; the message names the layer and the field."""


@dataclass
class IrContext:
    """What an op needs to describe a layer in the IR: shapes, producers, and the scales calibration chose."""

    layer_graph: Any  # core.frontend.layers.LayerGraph: the folded float graph and its layers
    table: Any  # core.quantize.table.CalibrationTable, power-of-two target
    min_shift: int = 0
    max_shift: int = 31
    # the spec maps the image to int8 with this log2scale; a QAT table may leave the input out
    input_log2scale: int = 7

    @property
    def graph(self) -> Graph:
        return self.layer_graph.graph

    def scale_source(self, tensor: str) -> str:
        return self.layer_graph.scale_source(tensor)

    def producer_name(self, tensor: str) -> str:
        """The IR name of the layer producing `tensor`; "input" for the network input (seed 000, 4.1)."""
        if _canonical(tensor) == _canonical(self.graph.input_tensor):
            return "input"
        producer = self.layer_graph.producer_of(_canonical(tensor))
        if producer is None:
            raise IrError(f"tensor {tensor} is produced by no IR layer and is not the network input")
        return producer.ir_name

    def log2scale(self, tensor: str) -> int:
        """The log2scale of an activation tensor, or of a constant ('const:0')."""
        source = self.scale_source(tensor)
        if source == self.graph.input_tensor and source not in self.table.tensors:
            return self.input_log2scale
        entry = self.table.entry(source)
        if entry.log2scale is None:
            raise IrError(f"tensor {tensor} has no power-of-two scale (target {self.table.target}); the IR needs target=tf2ir")
        return entry.log2scale

    def hw(self, tensor: str) -> dict[str, int]:
        shape = self.graph.shape(tensor)
        return {"height": int(shape[1]), "width": int(shape[2])}

    def channels(self, tensor: str) -> int:
        return int(self.graph.shape(tensor)[-1])

    def check_shift(self, layer: "Layer", field_name: str, value: int) -> int:
        if not self.min_shift <= value <= self.max_shift:
            raise IrError(
                f"layer {layer.ir_name}: {field_name} = {value} is outside the target's shift range "
                f"[{self.min_shift}, {self.max_shift}] (target.min_shift / target.max_shift); "
                f"recalibrate (e.g. another calib.method or calib.pow2_rounding) or widen the target's range"
            )
        return value


# The IR's view of one op (seed 000, section 4.2), filled in by each op module:
#   ir_fields(layer, context) -> the op's keys of its JSON layer (everything but name,
#       operation, previous_layer, next_layer, which the emitter adds)
#   ir_params(layer, context) -> int8 constant tensors by kind ("weight", "bias"), in the
#       spec's layouts (conv weight HWCiCo, dwconv weight HWC, bias C)
#   kernel(fields, params, inputs) -> the layer's int8 output for int8 NHWC inputs (a batch),
#       exactly as the hardware computes it; `inputs` in the IR's order (add: [pl, add])
#   input_kinds: the .npy names of its inputs ("input"; add: "pl", "add"; concat2: "input0", "input1")
#   emit_c(fields, symbol) -> C99 source text (core/codegen_c.py assembles it into a program):
#       - it defines `static void <symbol>(const int8_t *in0, [const int8_t *in1,] int8_t *out)`,
#         one pointer per input in the IR's order (add: pl, add; concat2: input0, input1): one
#         image, HWC (int8, row-major), computing exactly what `kernel` computes for that image,
#         bit for bit. `out` never aliases an input.
#       - shapes, shifts and clamps are baked in as literals: the text depends on `fields` and
#         `symbol` only (same fields -> same text).
#       - constants are read from `<symbol>_weight` / `<symbol>_bias`, which the program defines
#         as `static const int8_t` arrays holding the IR's params of that kind flattened in C order
#         of the IR's layouts (conv weight HWCiCo, dwconv weight HWC, bias C); an op references
#         only the kinds its ir_params gives (no bias without load_bias).
#       - any other file-scope name it defines (caches, scratch, helpers) starts with `<symbol>_`;
#         it may use the helpers of core/c_runtime/qt_runtime.h (qt_* names, QT_* macros), which
#         the program includes before it, and nothing else beyond <stdint.h> and <string.h>.
#       - it compiles warning-free under `cc -std=c99 -Wall -Werror` and relies on no
#         implementation-defined behaviour (e.g. right shifts of negative values; see the runtime).
#       - a function marked QT_SIMD (compiled once per instruction set) keeps no array on its
#         stack: GCC 12 miscompiles such leaf functions for AVX-512 (see qt_runtime.h).
IrFields = Callable[["Layer", IrContext], dict]
IrParams = Callable[["Layer", IrContext], dict]
Kernel = Callable[[dict, dict, list], Any]
EmitC = Callable[[dict, str], str]


@dataclass(frozen=True)
class IrOp:
    name: str
    tf_ops: tuple[str, ...]  # TensorFlow ops that start a layer of this kind
    match: Matcher  # builds the Layer starting at a node of one of tf_ops
    annotate: AnnotateRule
    # decides between IR ops that share a TF op (e.g. Add of two activations vs a bias Add)
    applies: Callable[[Graph, Node, "GraphIndex"], bool] = lambda graph, node, index: True
    ir_fields: IrFields | None = None
    ir_params: IrParams | None = None
    kernel: Kernel | None = None
    input_kinds: tuple[str, ...] = ("input",)
    emit_c: EmitC | None = None  # the layer as a C99 function (contract above); None: no C backend yet
    # the layer as accelerator instructions: lower_accel(fields, params, inputs, output, lowering, name)
    # appends to `lowering` (core/accel_lowering.Lowering) what reads the PackedTensors `inputs`
    # and writes `output`; None: the operation never runs on the accelerator
    lower_accel: Callable[..., None] | None = None


IR_OPS: dict[str, IrOp] = {}


def register_op(op: IrOp) -> IrOp:
    if op.name in IR_OPS:
        raise ValueError(f"IR op {op.name!r} registered twice")
    IR_OPS[op.name] = op
    return op


class GraphIndex:
    """Lookups the matchers share: nodes by name, readers of each tensor, constants."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.nodes = graph.by_name()
        self.readers: dict[str, list[Node]] = {}
        for node in graph.nodes:
            for tensor in node.inputs:
                self.readers.setdefault(_canonical(tensor), []).append(node)
        self.end_points = set(graph.end_points)

    def producer(self, tensor: str) -> Node:
        return self.nodes[tensor.split(":")[0]]

    def is_const(self, tensor: str) -> bool:
        return self.producer(tensor).op == "Const"

    def const(self, tensor: str):
        return self.graph.constants[self.producer(tensor).name]

    def sole_reader(self, tensor: str) -> Node | None:
        """The one node reading `tensor`, if exactly one does and it is not an end point."""
        readers = self.readers.get(_canonical(tensor), [])
        if len(readers) != 1 or _canonical(tensor) in self.end_points:
            return None
        return readers[0]


def _canonical(tensor: str) -> str:
    name, _, index = tensor.partition(":")
    return f"{name}:{index or 0}"
