"""The folded graph seen as layers: which nodes execute together as one operation, and
what each of its tensors is (an activation input, a weight, a bias, an output that shares
its input's scale), so that calibration and annotation know what to quantize.

The machinery is here; the patterns themselves belong to the IR operations that define
them (core/ir/ops/<op>/), which `core.ir.layers.group_layers` passes in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Iterable, Mapping, Protocol

from core.frontend.graph import Graph, GraphError, Node, canonical_tensor

# nodes a layer never owns: they carry values, not computation
PASSIVE_OPS = ("Const", "Placeholder")


class LayerError(GraphError):
    """A node no IR layer can hold (no pattern starts there, or its pattern refuses it)."""

    def __init__(self, message: str, node: Node):
        super().__init__(message)
        self.node = node


class OutputRule(Enum):
    """What a layer's output quantization follows, as its operation's pattern declares it; a scheme says which rules its
    kernels impose (QuantScheme.fixed_outputs, input_quantized_outputs): TFLite's int8 kernels fix the quantization of
    an output bounded to [0, 1] at 1/256, copy their input's quantization through AVERAGE_POOL_2D; TF2IR's power-of-two
    scheme imposes none. A rule names a range, not an operation, so that a new operation picks one without a scheme
    learning its name."""

    OWN = "own"  # calibrated for its own values
    KEEPS_INPUT = "keeps_input"  # an average or a copy of the input's integers (a pooling window, a resize)
    KEEPS_INPUT_MAXIMA = "keeps_input_maxima"  # the input's largest integers (a max pool): the input is ranged for them
    UNIT_RANGE = "unit_range"  # bounded to [0, 1] whatever its input (a logistic, a softmax)
    SIGNED_UNIT_RANGE = "signed_unit_range"  # bounded to [-1, 1] whatever its input (a tanh)


class QKind(Enum):
    """TVM's QAnnotateKind: what a simulated quantize does to a tensor."""

    INPUT = "input"  # quantized where it is consumed
    WEIGHT = "weight"  # a constant, quantized without saturation
    ACTIVATION = "activation"  # produced in the accumulator's domain; quantized before its next use
    IDENTITY = "identity"  # passes its input's annotation (and scale) through
    INDEX = "index"  # integer ids read as they are (an Embedding's token ids): never quantized


class IntegerModelBuilder(Protocol):
    """What an operation's integer model builds its steps with. Each rendering has its own tensors: the annotated
    graph's (core/quantize/annotate.py makes one per layer, on a power-of-two table) are graph tensors' names, a float32
    tensor holding integers exactly (every value an int8 model reaches is far below 2^24) and int32/int64 tensors (via
    Cast) computing what needs more; the simulator's integer arrays, C's expressions, the accelerator's boxes of
    accumulator vectors."""

    graph: Graph  # the float graph (None where the model is computed on arrays: core/ir/integer_kernel.py)
    activation: str  # the layer's fused activation ("None", "Relu", ...)
    layer: "Layer"
    # the operation's own attributes the model reads: its pattern's `attrs` on the graph, its IR record on arrays (the
    # record's fields carry the attributes' names: softmax's beta)
    attrs: Any
    inputs: list[Any]  # the layer's quantized inputs, in its inputs' order
    input_log2scales: list[int]
    output_log2scale: int

    def const(self, label: str, value: Any, dtype: str = "float32") -> Any: ...
    def op(self, op: str, inputs: list[Any], *, cast_to: str | None = None, keep_dims: bool | None = None) -> Any: ...
    def to_ints(self, tensor: Any, log2scale: int) -> Any: ...  # FakeQuant's integers of a float32 tensor
    def round_shift(self, tensor: Any, shift: int) -> Any: ...  # * 2^-shift, rounded half up (right) or exact (left)
    def clamp(self, tensor: Any, low: int, high: int) -> Any: ...
    def from_ints(self, tensor: Any, log2scale: int) -> Any: ...  # float32 integers -> values at 2^-log2scale
    # TFLite's MultiplyByQuantizedMultiplier (rounding twice): a rescale of a quantized multiplier (core/ir/rescale.py),
    # rendered on arrays, in C and on the accelerator
    def rescale(self, tensor: Any, multiplier: int, shift: int) -> Any: ...


@dataclass(frozen=True)
class AnnotateRule:
    """How simulated quantization wraps one operation (seed 001).

    `inputs` gives the kind required of each activation input; `output` the kind of what
    the op produces. An op whose output kind is IDENTITY shares its input's scale
    (reshape): no quantize is inserted after it. `weight_channel_axes`: the axes of the
    weight that index its output channels (negative, from the last; merged in order, for
    per-channel scales). `integer_model`: where the operation's integer arithmetic is not its
    float op followed by one FakeQuant (two roundings, a table, an integer normalization), the
    graph ops that compute exactly its integers from its quantized inputs on a power-of-two
    target; the annotated graph then agrees with the integer simulator bit for bit."""

    inputs: tuple[QKind, ...]
    output: QKind
    weight: bool = False  # has a quantized weight
    bias: bool = False  # has a quantized bias
    weight_channel_axes: tuple[int, ...] = ()
    integer_model: Callable[[IntegerModelBuilder], str] | None = None  # -> the output tensor
    # the output holds values of the layer's constant only (a lookup of its rows): calibration ranges it for the whole
    # constant, so a row the calibration data never read (a rare word's) is not clipped
    output_of_weight: bool = False
    # element-wise, its largest outputs made of its inputs' largest values (a gate's product, a squeeze-excitation's
    # x * sigmoid(...); a residual sum; a monotone function, a clip, ReLU(max_value=k)): where a max pool reads it,
    # calibration ranges its inputs to their largest values too
    carries_tails: bool = False


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
    activation: str = "None"  # an IR activation_type (core/ir/activations.py)
    attrs: Any = None  # the operation's own matched attributes (a dataclass of its pattern module)
    rule: AnnotateRule | None = None  # its operation's, set by group_layers
    # the IR's name: `name` with '/' -> '_', made unique by group_layers (a/b and a_b would collide)
    ir_name: str = ""
    output_rule: OutputRule = OutputRule.OWN  # what its output's quantization follows, by its pattern

    def __post_init__(self):
        self.ir_name = self.ir_name or self.name.replace("/", "_")


class GraphIndex:
    """Lookups the matchers share: nodes by name, readers of each tensor, constants."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.nodes = graph.by_name()
        self.readers: dict[str, list[Node]] = {}
        for node in graph.nodes:
            for tensor in node.inputs:
                self.readers.setdefault(canonical_tensor(tensor), []).append(node)
        self.end_points = set(graph.end_points)

    def producer(self, tensor: str) -> Node:
        return self.nodes[tensor.split(":")[0]]

    def is_const(self, tensor: str) -> bool:
        return self.producer(tensor).op == "Const"

    def const(self, tensor: str):
        return self.graph.constants[self.producer(tensor).name]

    def sole_reader(self, tensor: str) -> Node | None:
        """The one node reading `tensor`, if exactly one does and it is not an end point."""
        readers = self.readers.get(canonical_tensor(tensor), [])
        if len(readers) != 1 or canonical_tensor(tensor) in self.end_points:
            return None
        return readers[0]


def always(graph: Graph, node: Node, index: GraphIndex) -> bool:
    return True


@dataclass(frozen=True)
class Pattern:
    """Where a layer of IR operation `op` starts in the graph: a node of one of `tf_ops` for
    which `applies` holds (it tells apart ops that share a TF op, e.g. an Add of two
    activations from a bias Add); `match` builds the Layer from there."""

    op: str
    tf_ops: tuple[str, ...]
    match: Callable[[Graph, Node, GraphIndex], Layer]
    applies: Callable[[Graph, Node, GraphIndex], bool] = always
    # it starts at a node that precedes its operation's own (a Pad before its conv, a Mul scaling a softmax's logits):
    # tried before the patterns that would take that node on its own
    leads: bool = False


@dataclass
class LayerGraph:
    graph: Graph  # the float graph the layers partition
    layers: list[Layer]  # in execution order
    _producers: dict[str, Layer] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self._producers = {layer.output: layer for layer in self.layers}

    def producer_of(self, tensor: str) -> Layer | None:
        return self._producers.get(tensor)

    def quantized_tensors(self) -> list[str]:
        """The tensors held in int8: the network's inputs (but those its layers read as integer ids: QKind.INDEX) and every
        layer output that has a scale of its own (an IDENTITY op such as reshape shares its input's)."""
        tensors = [tensor for tensor in self.graph.input_tensors if not self.is_ids(tensor)]
        for layer in self.layers:
            if layer.rule.output is not QKind.IDENTITY:
                tensors.append(layer.output)
        return tensors

    def is_ids(self, tensor: str) -> bool:
        """`tensor` (a network input) is integer ids its layers read as they are (an Embedding's), not a quantized tensor."""
        return any(QKind.INDEX in layer.rule.inputs for layer in self.layers if tensor in layer.inputs)

    def scale_source(self, tensor: str) -> str:
        """The quantized tensor whose scale `tensor` carries (through identity-like layers)."""
        layer = self.producer_of(tensor)
        while layer is not None and layer.rule.output is QKind.IDENTITY:
            tensor = layer.inputs[0]
            layer = self.producer_of(tensor)
        return tensor


def group_layers(graph: Graph, patterns: Iterable[Pattern], rules: Mapping[str, AnnotateRule],
                 what: str = "") -> LayerGraph:
    """Partition a folded, FakeQuant-free graph into layers by `patterns`; every computing
    node must belong to exactly one, or the graph is not expressible. `rules`: each
    operation's annotate rule; `what` describes the patterns' fusions in the refusal."""
    patterns = sorted(patterns, key=lambda pattern: not pattern.leads)
    index = GraphIndex(graph)
    owner: dict[str, str] = {}
    layers: list[Layer] = []
    for node in graph.nodes:
        if node.name in owner or node.op in PASSIVE_OPS:
            continue
        try:
            pattern = _pattern_for(graph, node, index, patterns, what)
            layer = pattern.match(graph, node, index)
        except LayerError:
            raise
        except GraphError as error:
            raise LayerError(str(error), node) from error
        layer.inputs = [canonical_tensor(tensor) for tensor in layer.inputs]
        layer.rule = rules[layer.op]
        for name in layer.nodes:
            if name in owner:
                raise GraphError(f"node {name} belongs to both layer {owner[name]} and layer {layer.name}")
            owner[name] = layer.name
        layers.append(layer)
    _unique_ir_names(layers)
    return LayerGraph(graph, layers)


def _unique_ir_names(layers: list[Layer]) -> None:
    """Two layers whose names differ only by '/' against '_' get distinct IR names: the later
    one takes the first free `<name>_<k>`."""
    taken: set[str] = set()
    for layer in layers:
        base, suffix = layer.ir_name, 1
        while layer.ir_name in taken:
            layer.ir_name, suffix = f"{base}_{suffix}", suffix + 1
        taken.add(layer.ir_name)


def _pattern_for(graph: Graph, node: Node, index: GraphIndex, patterns: list[Pattern], what: str) -> Pattern:
    for pattern in patterns:
        if node.op in pattern.tf_ops and pattern.applies(graph, node, index):
            return pattern
    operations = sorted({pattern.op for pattern in patterns})
    supported = sorted({op for pattern in patterns for op in pattern.tf_ops})
    raise LayerError(
        f"node {node.name} ({node.op}) is not part of any IR layer; the IR expresses "
        f"{', '.join(operations)} (from TensorFlow ops {', '.join(supported)}){what}", node
    )
