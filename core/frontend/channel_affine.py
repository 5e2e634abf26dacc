"""Per-channel affine maps that follow no conv (a BatchNormalization after a concatenation or a pool, as
DenseNet's; Keras' Normalization of the input, as EfficientNet's): Mul, RealDiv, Add, AddV2 or Sub of a 4-D
tensor by a constant vector over its channels. Before BatchNorm folding, each such chain's first op gets an
identity depthwise 1x1 conv in front (weights 1, no bias); folding (folding.py) then moves the whole chain into
that conv's weights and bias, as it does after any conv, and fold_check verifies the result. The IR runs it as
the dwconv it is, on the host or the accelerator. Scalar ops next to such a chain (Keras' Rescaling before its
Normalization) join it; a scalar op alone is left to the lookup tables (lut), as before."""

from __future__ import annotations

import numpy as np

from core.frontend.graph import Graph, Node, canonical_tensor, tensor_node
from core.frontend.rewrite import const_node, copy_node, finish, readers_of, unique_name

AFFINE_OPS = ("Mul", "RealDiv", "Add", "AddV2", "Sub")
FOLDS_INTO = ("Conv2D", "DepthwiseConv2dNative", "MatMul", "BiasAdd")  # what folding already moves a chain into


def _affine_operand(graph: Graph, node: Node) -> tuple[str, np.ndarray] | None:
    """(the tensor `node` maps, its constant) when `node` is an affine op of one 4-D tensor by a constant."""
    if node.op not in AFFINE_OPS or len(node.inputs) != 2:
        return None
    constants = [tensor for tensor in node.inputs if tensor_node(tensor) in graph.constants]
    if len(constants) != 1:
        return None
    (other,) = [tensor for tensor in node.inputs if tensor not in constants]
    shape = graph.shape(other)
    if (node.op == "RealDiv" and other != node.inputs[0]) or shape is None or len(shape) != 4:
        return None  # c / x is no affine map
    return other, np.asarray(graph.constants[tensor_node(constants[0])])


def _per_channel(graph: Graph, node: Node) -> bool:
    """An affine op by a vector of C > 1 values over the last axis (not a scalar: a lookup table's)."""
    found = _affine_operand(graph, node)
    if found is None:
        return False
    channels = graph.shape(found[0])[3]
    return channels not in (None, -1, 1) and found[1].size == channels and found[1].shape[-1:] == (channels,)


def _chain_start(graph: Graph, by_name: dict[str, Node], readers: dict, node: Node) -> Node | None:
    """The first op of the affine run (scalar or per-channel ops, each its producer's only reader) that ends in the
    per-channel `node`; None when a conv or a dense layer precedes the run (folding takes it as it is)."""
    while True:
        source = _affine_operand(graph, node)[0]
        producer = by_name.get(tensor_node(source))
        if producer is not None and producer.op in FOLDS_INTO:
            return None
        if producer is None or _affine_operand(graph, producer) is None or len(readers.get(canonical_tensor(source), [])) != 1:
            return node
        node = producer


def insert_channel_affine_convs(graph: Graph) -> tuple[Graph, list[str]]:
    """The graph with an identity depthwise 1x1 conv before the first op of each per-channel affine chain that
    no conv precedes; a line per insertion."""
    by_name, readers, taken = graph.by_name(), readers_of(graph), {node.name for node in graph.nodes}
    starts = {start.name for node in graph.nodes if _per_channel(graph, node) and (start := _chain_start(graph, by_name, readers, node))}
    nodes, constants, notes = [], dict(graph.constants), []
    for node in graph.nodes:
        if node.name not in starts:
            nodes.append(copy_node(node))
            continue
        source = _affine_operand(graph, node)[0]
        channels = graph.shape(source)[3]
        weights_name, conv_name = unique_name(f"{node.name}/channel_affine/weights", taken), unique_name(f"{node.name}/channel_affine", taken)
        taken |= {weights_name, conv_name}
        constants[weights_name] = np.ones((1, 1, channels, 1), np.float32)
        conv = Node(conv_name, "DepthwiseConv2dNative", [source, weights_name],
                    {"T": {"type": "float32"}, "strides": {"list_i": [1, 1, 1, 1]}, "padding": {"s": "VALID"},
                     "data_format": {"s": "NHWC"}, "dilations": {"list_i": [1, 1, 1, 1]}}, [])
        reading = [f"{conv_name}:0" if tensor == source else tensor for tensor in node.inputs]
        nodes += [const_node(weights_name, constants[weights_name]), conv, copy_node(node, inputs=reading)]
        notes.append(f"{node.name}: a per-channel affine chain after no conv -> an identity depthwise 1x1 conv for it to fold into")
    if not notes:
        return graph, []
    return finish(graph, nodes, constants), notes
