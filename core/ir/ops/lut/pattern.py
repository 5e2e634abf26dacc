"""lut in the graph: a region of element-wise ops on one activation tensor x and scalar constants
(LeakyRelu, Sigmoid, Tanh, ... and Keras's decomposed forms: hard-swish x * Relu6(x + 3) / 6,
swish x * Sigmoid(x)), however many nodes, with one output. Whatever it computes, it is a
function of x alone, element by element: on int8 inputs, 256 values."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from core.frontend.graph import Graph, GraphError, Node, canonical_tensor
from core.frontend.layers import GraphIndex, Layer, OutputRule, Pattern
from core.frontend.softmax_beta import scales_softmax  # a softmax's beta is the softmax's, no table's

# ops computing each output element from the elements at the same position of their inputs
UNARY_OPS = ("Relu", "Relu6", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "Softplus", "Softsign", "Neg", "Abs",
             "Square", "Exp", "Erf", "Erfc", "Rsqrt")  # Erfc: Keras 3's exact gelu, 0.5 x erfc(-x / sqrt(2))
BINARY_OPS = ("Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow")  # Pow: x^3 (the tanh gelu)


@dataclass(frozen=True)
class NamedFunction:
    """A region that is one of the functions other formats have an operator for (a .tflite writer's LOGISTIC):
    `name` of NAMED_FUNCTIONS, and its parameter where it has one (a leaky ReLU's alpha)."""

    name: str
    alpha: float | None = None


# a region's steps on x, in order: each step's op and operands, x or an earlier step's index or a scalar constant
Steps = tuple[tuple[str, tuple], ...]


@dataclass(frozen=True)
class AffineClamp:
    """clamp(scale * x + offset, low, high): what a chain of scalar affine ops (Keras' Rescaling, x / 6 + 0.5) and clamps
    (ReLU(max_value=k), relu6, Minimum and Maximum with a constant, hard_sigmoid's relu6(x + 3) / 6) computes."""

    scale: float = 1.0
    offset: float = 0.0
    low: float = -math.inf
    high: float = math.inf

    def then_affine(self, scale: float, offset: float) -> "AffineClamp":
        """scale * clamp(y, low, high) + offset = clamp(scale * y + offset, ...) with the bounds mapped (swapped when
        scale < 0)."""
        low, high = sorted(scale * bound + offset for bound in (self.low, self.high))
        return AffineClamp(scale * self.scale, scale * self.offset + offset, low, high)

    def then_clamp(self, low: float, high: float) -> "AffineClamp":
        """clamp(clamp(y, l1, h1), l2, h2) = clamp(y, clamp(l1, l2, h2), clamp(h1, l2, h2))."""
        return replace(self, low=min(max(self.low, low), high), high=min(max(self.high, low), high))

    @property
    def affine(self) -> bool:
        return (self.scale, self.offset) != (1.0, 0.0)


@dataclass
class LutAttrs:
    source: str  # the tensor x the region is a function of
    function: str  # the region's ops, in order (what the table stands for)
    named: NamedFunction | None = None  # the function's name when it is a known one
    steps: Steps = ()  # the same, typed

    @property
    def affine_clamp(self) -> AffineClamp | None:
        """The function as clamp(a x + b, low, high), when it is one."""
        return affine_clamp(self.steps)


# the known functions by their steps on x, in the region's order: each step's op and operands, x or an earlier
# step's index or a scalar constant (Keras' hard_swish and the .tflite reader's HARD_SWISH: x * relu6(x + 3) / 6)
NAMED_FUNCTIONS: dict[str, Steps] = {
    "sigmoid": (("Sigmoid", ("x",)),),
    "tanh": (("Tanh", ("x",)),),
    "exp": (("Exp", ("x",)),),
    "leaky_relu": (("LeakyRelu", ("x",)),),
    "hard_swish": (("AddV2", ("x", 3.0)), ("Relu6", (0,)), ("RealDiv", (1, 6.0)), ("Mul", ("x", 2))),
    # Keras 3's gelu, exact (0.5 x erfc(-x / sqrt(2))) and approximate (0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))),
    # their constants as the float32 graph holds them
    "gelu": (("Mul", (0.5, "x")), ("Neg", ("x",)), ("Mul", (1, float(np.float32(math.sqrt(0.5))))), ("Erfc", (2,)), ("Mul", (0, 3))),
    "gelu_tanh": (("Mul", (0.5, "x")), ("Pow", ("x", 3.0)), ("Mul", (float(np.float32(0.044715)), 1)), ("AddV2", ("x", 2)),
                  ("Mul", (float(np.float32(math.sqrt(2 / math.pi))), 3)), ("Tanh", (4,)), ("AddV2", (1.0, 5)), ("Mul", (0, 6))),
    # a LayerNormalization's pieces (core/frontend/layer_norm.py)
    "square": (("Mul", ("x", "x")),),
    "rsqrt": (("Maximum", ("x", 0.0)), ("Rsqrt", (0,))),  # 1 / sqrt(max(x, 0)), a variance's inverse root
    "silu": (("Sigmoid", ("x",)), ("Mul", ("x", 0))),  # x * sigmoid(x), swish
}
# the same functions as other tools spell them: Keras 3's silu is x * sigmoid(1 * x), a hand-written swish multiplies
# either way round; a .tflite's RSQRT read back is Rsqrt(x) alone (the writer takes it where x's range starts at 0)
OTHER_SPELLINGS: dict[str, tuple[Steps, ...]] = {
    "rsqrt": ((("Rsqrt", ("x",)),),),
    "silu": ((("Sigmoid", ("x",)), ("Mul", (0, "x"))),
             (("Mul", (1.0, "x")), ("Sigmoid", (0,)), ("Mul", ("x", 1))),
             (("Mul", ("x", 1.0)), ("Sigmoid", (0,)), ("Mul", ("x", 1))),
             (("Mul", (1.0, "x")), ("Sigmoid", (0,)), ("Mul", (1, "x")))),
}
NAMED_PARAMETERS = {"leaky_relu": "alpha"}  # a known function's parameter: its one node's attribute
# every spelling of a known function -> its name
_NAME_OF_SPELLING: dict[Steps, str] = {**{steps: name for name, steps in NAMED_FUNCTIONS.items()},
                                       **{steps: name for name, others in OTHER_SPELLINGS.items() for steps in others}}
# the known functions whose output range is fixed (a scheme's kernels may fix their quantization)
FIXED_OUTPUTS = {"sigmoid": OutputRule.UNIT_RANGE, "tanh": OutputRule.SIGNED_UNIT_RANGE}


def _operands(node: Node, index: GraphIndex) -> list[str] | None:
    """The node's non-constant inputs, or None when a constant input is not a scalar (a
    per-channel constant makes the function depend on the position)."""
    tensors = []
    for tensor in node.inputs:
        if index.is_const(tensor):
            if np.asarray(index.const(tensor)).size != 1:
                return None
        else:
            tensors.append(canonical_tensor(tensor))
    return tensors


def _elementwise_of(node: Node, index: GraphIndex, allowed: set[str]) -> bool:
    if node.op not in UNARY_OPS + BINARY_OPS or scales_softmax(index.graph, node, index):
        return False
    operands = _operands(node, index)
    return bool(operands) and all(tensor in allowed for tensor in operands)


def starts_lut(graph: Graph, node: Node, index: GraphIndex) -> bool:
    """An element-wise op whose only non-constant input is one tensor (x, x * x, x + 3)."""
    operands = _operands(node, index) if node.op in UNARY_OPS + BINARY_OPS and not scales_softmax(index.graph, node, index) else None
    return bool(operands) and len(set(operands)) == 1


def _describe(node: Node, index: GraphIndex, names: dict[str, str]) -> str:
    arguments = []
    for tensor in node.inputs:
        if index.is_const(tensor):
            arguments.append(f"{float(np.asarray(index.const(tensor)).reshape(-1)[0]):.6g}")
        else:
            arguments.append(names[canonical_tensor(tensor)])
    alpha = f", alpha={node.attr('alpha'):.6g}" if node.op == "LeakyRelu" else ""
    return f"{node.op}({', '.join(arguments)}{alpha})"


def match_lut(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    """The largest region grown from `node` through readers that are element-wise in x and the
    region's own tensors; an end point ends it. It must have one output: where the largest has several (the function
    fans out, x * 0.5 read by two clips), the region stops at the first tensor read twice."""
    (source,) = set(_operands(node, index))
    # the widest region first: grown from every element-wise reader of x alike, where the function's branches join (GELU's
    # 0.5 x times erfc(-x / sqrt(2))); then from `node` alone; then stopping at a tensor read twice
    for siblings, through_shared in ((True, True), (False, True), (False, False)):
        region, outputs = _region(node, index, source, through_shared, siblings)
        if len(outputs) == 1:
            break
    if len(outputs) != 1:
        raise GraphError(f"{node.name}: the element-wise ops on {source} starting here ({', '.join(sorted(region))}) "
                         f"have {len(outputs)} outputs ({', '.join(outputs)}); a lookup table has one")
    order = [n for n in graph.nodes if n.name in region]  # the graph's (topological) order
    labels = {source: "x", **{f"{n.name}:0": f"t{k}" for k, n in enumerate(order)}}
    function = "; ".join(f"t{k} = {_describe(n, index, labels)}" for k, n in enumerate(order))
    steps = _steps(order, source, index)
    named = _named(order, steps)
    return Layer(name=node.name, op="lut", inputs=[source], output=outputs[0], nodes=[n.name for n in order],
                 attrs=LutAttrs(source=source, function=function, named=named, steps=steps),
                 output_rule=FIXED_OUTPUTS.get(named.name if named else None, OutputRule.OWN))


def _region(node: Node, index: GraphIndex, source: str, through_shared: bool, siblings: bool) -> tuple[set[str], list[str]]:
    """(the region's nodes, its outputs) grown from `node` (`siblings`: and from every other reader of `source` that is
    element-wise in it alone); `through_shared`: also past a tensor several nodes read."""
    seeds = [node, *(reader for reader in index.readers.get(source, []) if siblings and reader.name != node.name
                     and _elementwise_of(reader, index, {source}))]
    region, tensors = {seed.name for seed in seeds}, {f"{seed.name}:0" for seed in seeds}
    frontier = sorted(tensors)
    while frontier:
        tensor = frontier.pop(0)
        if tensor in index.end_points or (not through_shared and len(index.readers.get(tensor, [])) > 1):
            continue
        for reader in index.readers.get(tensor, []):
            if reader.name not in region and _elementwise_of(reader, index, tensors | {source}):
                region.add(reader.name)
                tensors.add(f"{reader.name}:0")
                frontier.append(f"{reader.name}:0")
    outputs = sorted(tensor for tensor in tensors if tensor in index.end_points or not index.readers.get(tensor)
                     or any(reader.name not in region for reader in index.readers[tensor]))
    return region, outputs


def _steps(order: list[Node], source: str, index: GraphIndex) -> Steps:
    """The region as NAMED_FUNCTIONS writes a function: operands x, an earlier step's index or a scalar."""
    positions = {f"{n.name}:0": k for k, n in enumerate(order)}
    def operand(tensor: str):
        if index.is_const(tensor):
            return float(np.asarray(index.const(tensor)).reshape(-1)[0])
        tensor = canonical_tensor(tensor)
        return "x" if tensor == source else positions[tensor]
    return tuple((n.op, tuple(operand(tensor) for tensor in n.inputs)) for n in order)


def _named(order: list[Node], steps: Steps) -> NamedFunction | None:
    name = _NAME_OF_SPELLING.get(steps)
    if name is None:
        return None
    parameter = NAMED_PARAMETERS.get(name)
    return NamedFunction(name, None if parameter is None else float(order[0].attr(parameter)))


# each chain step -> (scale, offset) of its affine map, or (low, high) of its clamp, from its scalar constant c
_AFFINE_STEPS = {("Mul", 0): lambda c: (c, 0.0), ("Mul", 1): lambda c: (c, 0.0), ("RealDiv", 0): lambda c: (1.0 / c, 0.0),
                 ("Add", 0): lambda c: (1.0, c), ("Add", 1): lambda c: (1.0, c), ("AddV2", 0): lambda c: (1.0, c),
                 ("AddV2", 1): lambda c: (1.0, c), ("Sub", 0): lambda c: (1.0, -c), ("Sub", 1): lambda c: (-1.0, c)}
_CLAMP_STEPS = {("Minimum", 0): lambda c: (-math.inf, c), ("Minimum", 1): lambda c: (-math.inf, c),
                ("Maximum", 0): lambda c: (c, math.inf), ("Maximum", 1): lambda c: (c, math.inf)}
_UNARY_CLAMPS = {"Relu": (0.0, math.inf), "Relu6": (0.0, 6.0)}


def affine_clamp(steps: Steps) -> AffineClamp | None:
    """The steps as clamp(a x + b, low, high) when they are a chain (each reads the one before, the first x) of scalar
    affine maps and clamps; None otherwise (a sigmoid, x * x, a map to a constant)."""
    function = AffineClamp()
    for position, (op, operands) in enumerate(steps):
        previous = "x" if position == 0 else position - 1
        if op == "Neg" and operands == (previous,):
            function = function.then_affine(-1.0, 0.0)
        elif op in _UNARY_CLAMPS and operands == (previous,):
            function = function.then_clamp(*_UNARY_CLAMPS[op])
        elif len(operands) == 2 and [o for o in operands if not isinstance(o, float)] == [previous]:
            at = 0 if operands[0] == previous and not isinstance(operands[0], float) else 1  # 0 in x - c, 1 in c - x
            constant = operands[1 - at]
            if (op, at) in _AFFINE_STEPS and not (op == "RealDiv" and constant == 0.0):
                function = function.then_affine(*_AFFINE_STEPS[op, at](constant))
            elif (op, at) in _CLAMP_STEPS:
                function = function.then_clamp(*_CLAMP_STEPS[op, at](constant))
            else:
                return None
        else:
            return None
    return function if function.scale != 0.0 and function.low < function.high else None


PATTERN = Pattern("lut", UNARY_OPS + BINARY_OPS, match_lut, applies=starts_lut)
