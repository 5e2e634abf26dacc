"""Constant folding: every constant-only computation replaced by a Const holding TensorFlow's
own result (QAT graphs express their BatchNorm folding this way, under `BatchNorm_Fold/...`).
FakeQuant nodes are never folded: later stages read the QAT ranges off them."""

from __future__ import annotations

from core.frontend.fake_quant import FAKE_QUANT_OPS
from core.frontend.graph import Graph, Node, canonical_tensor, tensor_index, tensor_node
from core.frontend.rewrite import const_node, copy_node, evaluate, finish, unique_name


def _is_evaluable_op(op: str) -> bool:
    """Deterministic, registered, and not a FakeQuant (later stages read QAT ranges off those)."""
    from tensorflow.python.framework import op_def_registry

    if op in FAKE_QUANT_OPS or op == "Const":
        return False
    op_def = op_def_registry.get(op)
    return op_def is not None and not op_def.is_stateful


def constant_node_names(graph: Graph) -> set[str]:
    """Non-Const nodes whose every input is (transitively) a constant."""
    constant: set[str] = {node.name for node in graph.nodes if node.op == "Const"}
    input_nodes = {tensor_node(tensor) for tensor in graph.input_tensors}
    folded: set[str] = set()
    for node in graph.nodes:  # topological order: inputs are decided before their readers
        if node.name in input_nodes or not node.inputs or not _is_evaluable_op(node.op):
            continue
        if all(tensor_node(t) in constant for t in node.inputs):
            constant.add(node.name)
            folded.add(node.name)
    return folded


def _tensors_to_materialize(graph: Graph, folded: set[str]) -> list[str]:
    """Outputs of folded nodes that something outside the folded region still reads."""
    needed: dict[str, None] = {}
    for node in graph.nodes:
        if node.name in folded:
            continue
        for tensor in node.inputs:
            if tensor_node(tensor) in folded:
                needed[canonical_tensor(tensor)] = None
    for tensor in graph.end_points:
        if tensor_node(tensor) in folded:
            needed[canonical_tensor(tensor)] = None
    return list(needed)


def _const_names(graph: Graph, tensors: list[str]) -> dict[str, str]:
    """Tensor -> the name of the Const replacing it."""
    taken = {node.name for node in graph.nodes}
    # output 0 keeps the node's name, so names like 'Conv_0/mul_fold' survive folding
    names = {tensor: tensor_node(tensor) for tensor in tensors if tensor_index(tensor) == 0}
    for tensor in tensors:
        if tensor_index(tensor) != 0:
            names[tensor] = unique_name(f"{tensor_node(tensor)}/output_{tensor_index(tensor)}", taken)
    return names


def fold_constants(graph: Graph) -> Graph:
    """Replace every constant-only computation by a Const holding TensorFlow's own result.

    FakeQuant nodes are kept even when their input is constant: their min/max are
    the QAT ranges that calibration and IR emission read.
    """
    folded = constant_node_names(graph)
    tensors = _tensors_to_materialize(graph, folded)
    if not tensors:
        return finish(graph, [copy_node(node) for node in graph.nodes], dict(graph.constants))
    values = dict(zip(tensors, evaluate(_constant_subgraph(graph, tensors), tensors)))
    renamed = _const_names(graph, tensors)
    outputs_of: dict[str, list[str]] = {}
    for tensor in tensors:
        outputs_of.setdefault(tensor_node(tensor), []).append(tensor)

    nodes: list[Node] = []
    constants = dict(graph.constants)
    for node in graph.nodes:
        if node.name not in folded:
            nodes.append(copy_node(node, inputs=[renamed.get(canonical_tensor(t), t) for t in node.inputs]))
            continue
        for tensor in outputs_of.get(node.name, []):  # in place of the node, so the order stays topological
            nodes.append(const_node(renamed[tensor], values[tensor]))
            constants[renamed[tensor]] = values[tensor]
    end_points = [canonical_tensor(renamed.get(canonical_tensor(t), t)) for t in graph.end_points]
    result = Graph(nodes, constants, list(graph.input_tensors), end_points, dict(graph.source))
    return finish(result, result.nodes, result.constants)


def _constant_subgraph(graph: Graph, tensors: list[str]) -> Graph:
    """Just the nodes `tensors` depend on: all constant, so no placeholder is needed to run them."""
    by_name = graph.by_name()
    keep: set[str] = set()
    stack = [tensor_node(t) for t in tensors]
    while stack:
        name = stack.pop()
        if name not in keep:
            keep.add(name)
            stack.extend(tensor_node(t) for t in by_name[name].inputs)
    nodes = [node for node in graph.nodes if node.name in keep]
    constants = {name: value for name, value in graph.constants.items() if name in keep}
    return Graph(nodes, constants, list(graph.input_tensors), [], {})
