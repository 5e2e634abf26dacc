"""lut in the graph: a region of element-wise ops on one activation tensor x and scalar constants
(LeakyRelu, Sigmoid, Tanh, ... and Keras's decomposed forms: hard-swish x * Relu6(x + 3) / 6,
swish x * Sigmoid(x)), however many nodes, with one output. Whatever it computes, it is a
function of x alone, element by element: on int8 inputs, 256 values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.frontend.graph import Graph, GraphError, Node, canonical_tensor
from core.frontend.layers import GraphIndex, Layer, Pattern

# ops computing each output element from the elements at the same position of their inputs
UNARY_OPS = ("Relu", "Relu6", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "Softplus", "Softsign", "Neg", "Abs",
             "Square", "Exp", "Erf")
BINARY_OPS = ("Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum")


@dataclass(frozen=True)
class NamedFunction:
    """A region that is one of the functions other formats have an operator for (a .tflite writer's LOGISTIC):
    `name` of NAMED_FUNCTIONS, and its parameter where it has one (a leaky ReLU's alpha)."""

    name: str
    alpha: float | None = None


@dataclass
class LutAttrs:
    source: str  # the tensor x the region is a function of
    function: str  # the region's ops, in order (what the table stands for)
    named: NamedFunction | None = None  # the function's name when it is a known one


# the known functions by their steps on x, in the region's order: each step's op and operands, x or an earlier
# step's index or a scalar constant (Keras' hard_swish and the .tflite reader's HARD_SWISH: x * relu6(x + 3) / 6)
NAMED_FUNCTIONS: dict[str, tuple[tuple[str, tuple], ...]] = {
    "sigmoid": (("Sigmoid", ("x",)),),
    "tanh": (("Tanh", ("x",)),),
    "leaky_relu": (("LeakyRelu", ("x",)),),
    "hard_swish": (("AddV2", ("x", 3.0)), ("Relu6", (0,)), ("RealDiv", (1, 6.0)), ("Mul", ("x", 2))),
}
NAMED_PARAMETERS = {"leaky_relu": "alpha"}  # a known function's parameter: its one node's attribute


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
    if node.op not in UNARY_OPS + BINARY_OPS:
        return False
    operands = _operands(node, index)
    return bool(operands) and all(tensor in allowed for tensor in operands)


def starts_lut(graph: Graph, node: Node, index: GraphIndex) -> bool:
    """An element-wise op whose only non-constant input is one tensor (x, x * x, x + 3)."""
    operands = _operands(node, index) if node.op in UNARY_OPS + BINARY_OPS else None
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
    region's own tensors; an end point ends it. It must have one output."""
    (source,) = set(_operands(node, index))
    region, tensors = {node.name}, {f"{node.name}:0"}
    frontier = [f"{node.name}:0"]
    while frontier:
        tensor = frontier.pop(0)
        if tensor in index.end_points:
            continue
        for reader in index.readers.get(tensor, []):
            if reader.name not in region and _elementwise_of(reader, index, tensors | {source}):
                region.add(reader.name)
                tensors.add(f"{reader.name}:0")
                frontier.append(f"{reader.name}:0")
    outputs = sorted(tensor for tensor in tensors if tensor in index.end_points or not index.readers.get(tensor)
                     or any(reader.name not in region for reader in index.readers[tensor]))
    if len(outputs) != 1:
        raise GraphError(f"{node.name}: the element-wise ops on {source} starting here ({', '.join(sorted(region))}) "
                         f"have {len(outputs)} outputs ({', '.join(outputs)}); a lookup table has one")
    order = [n for n in graph.nodes if n.name in region]  # the graph's (topological) order
    labels = {source: "x", **{f"{n.name}:0": f"t{k}" for k, n in enumerate(order)}}
    function = "; ".join(f"t{k} = {_describe(n, index, labels)}" for k, n in enumerate(order))
    return Layer(name=node.name, op="lut", inputs=[source], output=outputs[0], nodes=[n.name for n in order],
                 attrs=LutAttrs(source=source, function=function, named=_named(order, source, index)))


def _steps(order: list[Node], source: str, index: GraphIndex) -> tuple[tuple[str, tuple], ...]:
    """The region as NAMED_FUNCTIONS writes a function: operands x, an earlier step's index or a scalar."""
    positions = {f"{n.name}:0": k for k, n in enumerate(order)}
    def operand(tensor: str):
        if index.is_const(tensor):
            return float(np.asarray(index.const(tensor)).reshape(-1)[0])
        tensor = canonical_tensor(tensor)
        return "x" if tensor == source else positions[tensor]
    return tuple((n.op, tuple(operand(tensor) for tensor in n.inputs)) for n in order)


def _named(order: list[Node], source: str, index: GraphIndex) -> NamedFunction | None:
    steps = _steps(order, source, index)
    name = next((name for name, known in NAMED_FUNCTIONS.items() if known == steps), None)
    if name is None:
        return None
    parameter = NAMED_PARAMETERS.get(name)
    return NamedFunction(name, None if parameter is None else float(order[0].attr(parameter)))


PATTERN = Pattern("lut", UNARY_OPS + BINARY_OPS, match_lut, applies=starts_lut)
