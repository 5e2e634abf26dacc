"""What the graph rewrites (constant folding, BatchNorm folding) share: copies of nodes that
alias nothing, new Consts, the readers of each tensor, fresh names, pruning to what the end
points need, and evaluation of tensors with TensorFlow itself."""

from __future__ import annotations

from typing import Any

import numpy as np

from core.frontend.graph import Graph, Node, canonical_tensor, tensor_node
from core.frontend.tf_runtime import new_session


def copy_node(node: Node, **changes: Any) -> Node:
    """A node that shares nothing mutable with `node`, so results never alias their inputs."""
    fields_ = {
        "name": node.name,
        "op": node.op,
        "inputs": list(node.inputs),
        "attrs": {key: dict(value) for key, value in node.attrs.items()},
        "output_shapes": [None if shape is None else list(shape) for shape in node.output_shapes],
    }
    fields_.update(changes)
    return Node(**fields_)


def const_node(name: str, value: np.ndarray) -> Node:
    return Node(name, "Const", [], {"dtype": {"type": value.dtype.name}}, [list(value.shape)])


def constant_of(graph: Graph, by_name: dict[str, Node], tensor: str) -> np.ndarray | None:
    """The value of `tensor` where a Const node gives it, else None (computed)."""
    node = by_name.get(tensor_node(tensor))
    return None if node is None or node.op != "Const" else np.asarray(graph.constants[node.name])


def has_shapes(graph: Graph) -> bool:
    return any(node.output_shapes for node in graph.nodes)


def readers_of(graph: Graph) -> dict[str, list[tuple[Node, int]]]:
    """Tensor ('node:i') -> (consumer node, input position) for every read of it."""
    readers: dict[str, list[tuple[Node, int]]] = {}
    for node in graph.nodes:
        for position, tensor in enumerate(node.inputs):
            readers.setdefault(canonical_tensor(tensor), []).append((node, position))
    return readers


def unique_name(base: str, taken: set[str]) -> str:
    name, counter = base, 1
    while name in taken:
        name, counter = f"{base}_{counter}", counter + 1
    taken.add(name)
    return name


def remove_dead_nodes(graph: Graph) -> Graph:
    """Only what the end points (and the input placeholder) depend on, in the same order."""
    by_name = graph.by_name()
    live: set[str] = set()
    stack = [tensor_node(t) for t in graph.end_points] + [tensor_node(t) for t in graph.input_tensors]
    while stack:
        name = stack.pop()
        if name in live or name not in by_name:
            continue
        live.add(name)
        stack.extend(tensor_node(t) for t in by_name[name].inputs)
    nodes = [copy_node(node) for node in graph.nodes if node.name in live]
    constants = {name: value for name, value in graph.constants.items() if name in live}
    return Graph(nodes, constants, list(graph.input_tensors), list(graph.end_points), dict(graph.source))


def finish(template: Graph, nodes: list[Node], constants: dict[str, np.ndarray]) -> Graph:
    """Prune, and re-derive shapes when the input graph carried them (the importer's graphs do)."""
    graph = remove_dead_nodes(Graph(nodes, constants, list(template.input_tensors), list(template.end_points), dict(template.source)))
    if has_shapes(template):
        graph.infer_shapes()
    return graph


def evaluate(graph: Graph, fetches: list[str], feed: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """Evaluate `fetches` with TensorFlow itself, in one Session.run."""
    import tensorflow as tf

    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.compat.v1.import_graph_def(graph.to_graph_def(), name="")
    with new_session(tf_graph) as session:
        values = session.run(fetches, feed_dict=feed or {})
    return [np.asarray(value) for value in values]


def evaluate_region(graph: Graph, nodes: list[str], source: str, output: str, values: np.ndarray) -> np.ndarray:
    """What the nodes `nodes` of `graph` (element-wise of the one tensor `source`) compute at
    `output` when `source` takes `values`, with TensorFlow itself, in float32."""
    by_name = graph.by_name()
    placeholder = "region_input"
    region = [copy_node(by_name[name], inputs=[placeholder if canonical_tensor(t) == canonical_tensor(source) else t
                                               for t in by_name[name].inputs], output_shapes=[]) for name in nodes]
    consts = {tensor_node(t) for node in region for t in node.inputs if t != placeholder and tensor_node(t) not in nodes}
    region = [Node(placeholder, "Placeholder", [], {"dtype": {"type": "float32"}}),
              *(copy_node(by_name[name]) for name in sorted(consts)), *region]
    sub = Graph(region, {name: graph.constants[name] for name in consts}, f"{placeholder}:0", [output], {})
    (result,) = evaluate(sub, [output], {f"{placeholder}:0": np.asarray(values, np.float32)})
    return result
