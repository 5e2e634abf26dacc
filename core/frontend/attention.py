"""A multi-head attention's graph (Keras' MultiHeadAttention) as layers the IR has, rewritten before the signals are
lifted (core/frontend/canonicalize.py: EARLY_REWRITES):

- an Einsum of two activations (the scores `BTNH,BSNH->BNTS`, the context `BNTS,BSNH->BTNH`) as TFLite's converter
  lowers it: Transposes bringing the batch axes first and the summed axis last or next to last, a BatchMatMulV2 (its
  adj flags sparing a Transpose where one would only swap the last two axes), and a Transpose to the output's order;
- a projection's bias added after its heads were split ([T, N x H] -> [T, N, H], then + bias [N, H]) added before the
  split, where it is the bias of the Dense on every token that the signal lifting holds as a 1x1 conv.

The products of two activations are then the IR's batch_matmul, the head moves its transpose and reshape."""

from __future__ import annotations

import numpy as np

from core.frontend.graph import Graph, GraphError, Node, tensor_node
from core.frontend.rewrite import const_node, copy_node, readers_of


class EinsumRefused(GraphError):
    """An Einsum the rewrite cannot write as one batch matrix product."""


def _labels(equation: str, node: Node) -> tuple[str, str, str]:
    inputs, arrow, output = equation.replace(" ", "").partition("->")
    operands = inputs.split(",")
    if not arrow or len(operands) != 2 or "." in equation or any(len(set(part)) != len(part) for part in (*operands, output)):
        raise EinsumRefused(f"{node.name}: Einsum {equation!r}; the importer takes a product of two operands without ellipsis or "
                            "repeated labels (a multi-head attention's)")
    return operands[0], operands[1], output


def _grouped(first: str, second: str, output: str, node: Node) -> tuple[str, str, str, str]:
    """(batch, rows, depth, columns) labels: batch in all three, rows only in `first`, columns only in `second`, depth in
    both operands and not the output; one label each for rows, depth and columns."""
    batch = "".join(label for label in output if label in first and label in second)
    rows = "".join(label for label in first if label not in second)
    columns = "".join(label for label in second if label not in first)
    depth = "".join(label for label in first if label in second and label not in output)
    if len(rows) != 1 or len(columns) != 1 or len(depth) != 1 or set(rows + columns) - set(output) or not batch or batch[0] != output[0]:
        raise EinsumRefused(f"{node.name}: Einsum {first},{second}->{output}; the importer takes one batch matrix product (one row, "
                            "one column and one summed label, the batch axis first), as a multi-head attention's")
    return batch, rows, depth, columns


def _transposed(name: str, source: str, order: str, target: str, constants: dict) -> tuple[list[Node], str]:
    """Nodes permuting `source` (axes labelled `order`) to `target`'s order: none where they agree."""
    if order == target:
        return [], source
    constants[f"{name}/perm"] = np.asarray([order.index(label) for label in target], np.int32)
    return [const_node(f"{name}/perm", constants[f"{name}/perm"]),
            Node(name, "Transpose", [source, f"{name}/perm"], {"T": {"type": "float32"}, "Tperm": {"type": "int32"}})], f"{name}:0"


def _einsum_as_batch_matmul(node: Node, constants: dict) -> list[Node]:
    first, second, output = _labels(node.attr("equation", ""), node)
    batch, rows, depth, columns = _grouped(first, second, output, node)
    adj_x = first == batch + depth + rows
    adj_y = second == batch + columns + depth
    lhs_nodes, lhs = _transposed(f"{node.name}/lhs", node.inputs[0], first, batch + (depth + rows if adj_x else rows + depth), constants)
    rhs_nodes, rhs = _transposed(f"{node.name}/rhs", node.inputs[1], second, batch + (columns + depth if adj_y else depth + columns),
                                 constants)
    product_order = batch + rows + columns
    product = Node(node.name if product_order == output else f"{node.name}/product", "BatchMatMulV2", [lhs, rhs],
                   {"T": {"type": "float32"}, "adj_x": {"b": adj_x}, "adj_y": {"b": adj_y}})
    if product_order == output:
        return [*lhs_nodes, *rhs_nodes, product]
    constants[f"{node.name}/perm"] = np.asarray([product_order.index(label) for label in output], np.int32)
    return [*lhs_nodes, *rhs_nodes, product, const_node(f"{node.name}/perm", constants[f"{node.name}/perm"]),
            Node(node.name, "Transpose", [f"{product.name}:0", f"{node.name}/perm"], {"T": {"type": "float32"}, "Tperm": {"type": "int32"}})]


def einsums_as_batch_matmuls(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite: each Einsum of two activations as Transposes and a BatchMatMulV2."""
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        if node.op != "Einsum" or len(node.inputs) != 2 or any(by_name[tensor_node(tensor)].op == "Const" for tensor in node.inputs):
            continue
        replacements[node.name] = _einsum_as_batch_matmul(node, constants)
        notes.append(f"{node.name}: Einsum {node.attr('equation', '')!r} -> "
                     f"{' + '.join(new.op for new in replacements[node.name] if new.op != 'Const')}")
    return replacements, constants, notes


def _split_heads_bias(graph: Graph, by_name: dict[str, Node], readers, add: Node) -> tuple[Node, np.ndarray] | None:
    """(the Reshape splitting the heads, the bias as one vector) where `add` adds a constant [N, H] to the Reshape of an
    [L, N x H] tensor to [L, N, H] that nothing else reads."""
    if add.op not in ("Add", "AddV2") or len(add.inputs) != 2:
        return None
    split, bias = (by_name.get(tensor_node(tensor)) for tensor in add.inputs)
    if split is None or bias is None or split.op != "Reshape" or bias.op != "Const" or len(readers.get(f"{split.name}:0", [])) != 1:
        return None
    before, after, value = graph.shape(split.inputs[0]), graph.shape(f"{split.name}:0"), np.asarray(graph.constants[bias.name])
    if before is None or after is None or len(before) != 3 or len(after) != 4 or min(before[1:]) < 1 or min(after[1:]) < 1:
        return None
    if before[1] != after[1] or before[2] != after[2] * after[3] or value.shape not in ((after[2], after[3]), (1, 1, after[2], after[3])):
        return None
    return split, value.reshape(-1)


def head_bias_before_split(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite: a projection's bias added to its heads ([L, N, H] + [N, H]) added before the split ([L, N x H]
    + [N x H]), so the Dense before it takes it."""
    replacements, constants, notes = {}, {}, []
    readers = readers_of(graph)
    for node in graph.nodes:
        found = _split_heads_bias(graph, by_name, readers, node)
        if found is None:
            continue
        split, bias = found
        name = f"{node.name}/before_heads"
        constants[f"{name}/bias"] = bias.astype(np.float32)
        replacements[split.name] = []
        replacements[node.name] = [const_node(f"{name}/bias", constants[f"{name}/bias"]),
                                   Node(name, "AddV2", [split.inputs[0], f"{name}/bias"], {"T": {"type": "float32"}}),
                                   copy_node(split, name=node.name, inputs=[f"{name}:0", split.inputs[1]])]
        notes.append(f"{node.name}: the bias of {split.name}'s heads added before the split")
    return replacements, constants, notes
