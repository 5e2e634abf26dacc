"""The project's graph representation, shared by every stage.

A `Graph` is a topologically ordered list of `Node`s (op type, JSON-friendly
attributes, input edges), constants held as numpy arrays, the network input
tensor and its end points, and the static shape of every tensor.

It round-trips to a TensorFlow GraphDef (`to_graph_def` / `from_graph_def`), so
a stage can always execute what it holds with TensorFlow itself, and it is
stored as `graph.json` plus one `.npy` per constant: both are byte-stable, so
the artifact store's digests only change when the graph does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from core.limits import elements

GRAPH_FILE = "graph.json"
CONSTANTS_DIR = "constants"
FORMAT_VERSION = 1


class GraphError(ValueError):
    """A graph that cannot be used as asked; the message says what and where."""


def tensor_node(tensor: str) -> str:
    """'conv/Relu6:0' -> 'conv/Relu6'."""
    return tensor.lstrip("^").split(":")[0]


def tensor_index(tensor: str) -> int:
    parts = tensor.split(":")
    return int(parts[1]) if len(parts) > 1 else 0


def canonical_tensor(tensor: str) -> str:
    """Tensor names as TensorFlow spells a node's output: 'x' -> 'x:0'."""
    return f"{tensor_node(tensor)}:{tensor_index(tensor)}"


@dataclass
class Node:
    name: str
    op: str
    inputs: list[str] = field(default_factory=list)
    # attr name -> {"kind": value}; see _encode_attr for the kinds
    attrs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # static shape per output; None for an unknown rank, -1 for an unknown dim
    output_shapes: list[list[int] | None] = field(default_factory=list)

    def attr(self, key: str, default: Any = None) -> Any:
        if key not in self.attrs:
            return default
        (value,) = self.attrs[key].values()
        return value

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op": self.op,
            "inputs": self.inputs,
            "attrs": self.attrs,
            "output_shapes": self.output_shapes,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "Node":
        return cls(obj["name"], obj["op"], list(obj["inputs"]), dict(obj["attrs"]), list(obj["output_shapes"]))


@dataclass
class Graph:
    nodes: list[Node]
    constants: dict[str, np.ndarray]
    input_tensors: list[str]  # the network's inputs in the model's order (one tensor given alone is a list of one)
    end_points: list[str]
    # free-form facts about where the graph came from (format, file digest, ...)
    source: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if isinstance(self.input_tensors, str):
            self.input_tensors = [self.input_tensors]

    @property
    def input_tensor(self) -> str:
        """The network's one input; a GraphError naming them where it has several (the step asking takes one)."""
        if len(self.input_tensors) != 1:
            raise GraphError(f"the network has {len(self.input_tensors)} inputs ({', '.join(self.input_tensors)}); this step takes one")
        return self.input_tensors[0]

    # --- lookup -----------------------------------------------------------
    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise GraphError(f"no node named {name!r} in the graph")

    def by_name(self) -> dict[str, Node]:
        return {node.name: node for node in self.nodes}

    def consumers(self) -> dict[str, list[Node]]:
        """Node name -> the nodes that read any of its outputs."""
        result: dict[str, list[Node]] = {node.name: [] for node in self.nodes}
        for node in self.nodes:
            for tensor in node.inputs:
                result.setdefault(tensor_node(tensor), []).append(node)
        return result

    def shape(self, tensor: str) -> list[int] | None:
        node = self.node(tensor_node(tensor))
        return node.output_shapes[tensor_index(tensor)]

    def activation_bytes(self) -> dict[str, int]:
        """float32 bytes of each computed tensor for one image, from its static shape (a dynamic
        batch dimension counts 1): what running the graph holds per image at most."""
        return {f"{node.name}:{index}": 4 * elements(shape) for node in self.nodes if node.op != "Const"
                for index, shape in enumerate(node.output_shapes) if shape is not None}

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
        return dict(sorted(counts.items()))

    # --- TensorFlow interchange --------------------------------------------
    def to_graph_def(self):
        import tensorflow as tf

        graph_def = tf.compat.v1.GraphDef()
        for node in self.nodes:
            node_def = graph_def.node.add()
            node_def.name = node.name
            node_def.op = node.op
            node_def.input.extend(node.inputs)
            for key, encoded in node.attrs.items():
                node_def.attr[key].CopyFrom(_decode_attr(encoded))
            if node.op == "Const":
                node_def.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(self.constants[node.name]))
        return graph_def

    @classmethod
    def from_graph_def(cls, graph_def, input_tensors: str | list[str], end_points: Iterable[str], source: dict | None = None) -> "Graph":
        """Nodes in topological order, constants pulled out, shapes left to `infer_shapes`."""
        import tensorflow as tf

        nodes: list[Node] = []
        constants: dict[str, np.ndarray] = {}
        for node_def in _topological(graph_def.node):
            attrs = {}
            for key in sorted(node_def.attr):
                if node_def.op == "Const" and key == "value":
                    constants[node_def.name] = tf.make_ndarray(node_def.attr[key].tensor)
                    continue
                if key.startswith("_"):  # TF-internal (_output_shapes, _class): derived, not part of the op
                    continue
                attrs[key] = _encode_attr(node_def.attr[key])
            inputs = [tensor for tensor in node_def.input if not tensor.startswith("^")]
            nodes.append(Node(node_def.name, node_def.op, inputs, attrs, []))
        inputs = [input_tensors] if isinstance(input_tensors, str) else list(input_tensors)
        return cls(nodes, constants, [canonical_tensor(t) for t in inputs], [canonical_tensor(t) for t in end_points], dict(source or {}))

    def infer_shapes(self) -> None:
        """Fill every node's output shapes from TensorFlow's static shape inference."""
        import tensorflow as tf

        tf_graph = tf.Graph()
        with tf_graph.as_default():
            tf.compat.v1.import_graph_def(self.to_graph_def(), name="")
        for node in self.nodes:
            op = tf_graph.get_operation_by_name(node.name)
            node.output_shapes = [_shape_list(output.shape) for output in op.outputs]

    # --- storage ------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """graph.json + constants/<n>.npy; byte-identical for equal graphs."""
        directory = Path(directory)
        (directory / CONSTANTS_DIR).mkdir(parents=True, exist_ok=True)
        constant_files = {}
        for index, name in enumerate(sorted(self.constants)):
            file_name = f"{index:05d}_{_safe_file_name(name)}.npy"
            np.save(directory / CONSTANTS_DIR / file_name, np.asarray(self.constants[name], order="C"), allow_pickle=False)
            constant_files[name] = f"{CONSTANTS_DIR}/{file_name}"
        document = {
            "format_version": FORMAT_VERSION,
            **({"input_tensor": self.input_tensors[0]} if len(self.input_tensors) == 1 else {"input_tensors": self.input_tensors}),
            "end_points": self.end_points,
            "source": self.source,
            "constants": constant_files,
            "nodes": [node.to_json() for node in self.nodes],
        }
        (directory / GRAPH_FILE).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")

    @classmethod
    def load(cls, directory: Path) -> "Graph":
        directory = Path(directory)
        path = directory / GRAPH_FILE
        if not path.is_file():
            raise GraphError(f"{path}: no graph here; expected the output directory of the import or fold_check stage")
        document = json.loads(path.read_text())
        if document.get("format_version") != FORMAT_VERSION:
            raise GraphError(f"{path}: graph format {document.get('format_version')}, expected {FORMAT_VERSION}; re-run import")
        constants = {name: np.load(directory / rel, allow_pickle=False) for name, rel in document["constants"].items()}
        nodes = [Node.from_json(obj) for obj in document["nodes"]]
        inputs = document["input_tensors"] if "input_tensors" in document else [document["input_tensor"]]
        return cls(nodes, constants, list(inputs), list(document["end_points"]), dict(document["source"]))


# --- attribute codec: AttrValue <-> {"kind": JSON value} ----------------------
_SCALAR_KINDS = ("s", "i", "f", "b", "type", "shape")


def _encode_scalar(kind: str, value: Any) -> Any:
    import tensorflow as tf

    if kind == "s":
        return value.decode("utf-8", errors="backslashreplace")
    if kind == "type":
        return tf.dtypes.as_dtype(value).name
    if kind == "shape":
        return None if value.unknown_rank else [int(dim.size) for dim in value.dim]
    if kind == "f":
        return float(value)
    if kind == "i":
        return int(value)
    return bool(value)


def _encode_attr(attr_value) -> dict[str, Any]:
    kind = attr_value.WhichOneof("value")
    if kind == "list":
        listed = attr_value.list
        for list_kind in _SCALAR_KINDS:
            items = list(getattr(listed, list_kind))
            if items:
                return {f"list_{list_kind}": [_encode_scalar(list_kind, item) for item in items]}
        return {"list_i": []}
    if kind in _SCALAR_KINDS:
        return {kind: _encode_scalar(kind, getattr(attr_value, kind))}
    if kind == "tensor":
        import tensorflow as tf

        return {"tensor": tf.make_ndarray(attr_value.tensor).tolist()}
    raise GraphError(f"attribute kind {kind!r} is not supported in the graph representation")


def _shape_proto(value: list[int] | None):
    import tensorflow as tf

    return tf.TensorShape(None if value is None else [None if dim < 0 else dim for dim in value]).as_proto()


def _decode_attr(encoded: dict[str, Any]):
    import tensorflow as tf

    attr_value = tf.compat.v1.AttrValue()
    ((kind, value),) = encoded.items()
    if kind.startswith("list_"):
        list_kind = kind[len("list_") :]
        field_ = getattr(attr_value.list, list_kind)
        attr_value.list.SetInParent()
        for item in value:
            if list_kind == "shape":
                field_.add().CopyFrom(_shape_proto(item))
            else:
                field_.append(_scalar_proto_value(list_kind, item))
        return attr_value
    if kind == "shape":
        attr_value.shape.CopyFrom(_shape_proto(value))
    elif kind == "tensor":
        attr_value.tensor.CopyFrom(tf.make_tensor_proto(np.asarray(value)))
    else:
        setattr(attr_value, kind, _scalar_proto_value(kind, value))
    return attr_value


def _scalar_proto_value(kind: str, value: Any) -> Any:
    import tensorflow as tf

    if kind == "s":
        return value.encode("utf-8")
    if kind == "type":
        return tf.dtypes.as_dtype(value).as_datatype_enum
    return value


def _shape_list(shape) -> list[int] | None:
    if shape.rank is None:
        return None
    return [-1 if dim is None else int(dim) for dim in shape.as_list()]


def _safe_file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:120]


def _topological(node_defs) -> list:
    """Kahn's order, stable with respect to the file's order."""
    by_name = {node_def.name: node_def for node_def in node_defs}
    order: list = []
    state: dict[str, int] = {}  # 1 = visiting, 2 = done
    for root in node_defs:
        stack = [(root.name, False)]
        while stack:
            name, expanded = stack.pop()
            if state.get(name) == 2:
                continue
            if expanded:
                state[name] = 2
                order.append(by_name[name])
                continue
            if state.get(name) == 1:
                raise GraphError(f"the graph has a cycle through node {name!r}")
            state[name] = 1
            stack.append((name, True))
            for tensor in reversed(by_name[name].input):
                dep = tensor_node(tensor)
                if dep not in by_name:
                    raise GraphError(f"node {name!r} reads {tensor!r}, which no node produces")
                if state.get(dep) != 2:
                    if state.get(dep) == 1:
                        raise GraphError(f"the graph has a cycle through node {dep!r}")
                    stack.append((dep, False))
    return order


def as_input(samples: np.ndarray, graph: "Graph", tensor: str | None = None) -> np.ndarray:
    """`samples` in the shape the graph's input `tensor` (default: its one input) takes: a signal [N, L, C] fed to the image
    [N, 1, L, C] that the importer made of it (core/frontend/signals.py), token ids [N, L] to [N, 1, L]
    (core/frontend/embedding.py), are the same values, row-major; any other shape is left as it is."""
    tensor = tensor or graph.input_tensor
    shapes = graph.node(tensor_node(tensor)).output_shapes  # empty in a graph whose shapes are not inferred
    shape = shapes[tensor_index(tensor)] if shapes else None
    if shape is not None and len(shape) in (3, 4) and shape[1] == 1 and list(samples.shape[1:]) == list(shape[2:]):
        return samples.reshape(len(samples), *shape[1:])
    return samples


def named_samples(samples, graph: "Graph", key: str = "the data") -> dict[str, np.ndarray]:
    """{input tensor: its samples} of a batch: an array is the one input's; a dict (a model of several inputs) gives each
    input's by its name (the Placeholder's, as the model names its inputs). A GraphError names the inputs where they differ."""
    if not isinstance(samples, dict):
        if len(graph.input_tensors) > 1:
            names = ", ".join(tensor_node(tensor) for tensor in graph.input_tensors)
            raise GraphError(f"{key}: one array of samples, and the model has {len(graph.input_tensors)} inputs ({names}): with "
                             f"data=arrays save one array per input, named <split>/<input name>")
        return {graph.input_tensor: samples}
    by_name = {tensor_node(tensor): tensor for tensor in graph.input_tensors}
    if sorted(samples) != sorted(by_name):
        raise GraphError(f"{key}: samples for the inputs {', '.join(sorted(samples))}, and the model's inputs are "
                         f"{', '.join(by_name)}: with data=arrays name each array <split>/<input name>")
    return {by_name[name]: samples[name] for name in by_name}


def input_feed(samples, graph: "Graph") -> dict[str, np.ndarray]:
    """The feed_dict of a batch (named_samples'), each input's samples in the shape it takes (as_input)."""
    return {tensor: as_input(values, graph, tensor) for tensor, values in named_samples(samples, graph).items()}


def check_input_shape(images, graph: "Graph", key: str) -> None:
    """Each sample of `images` (shape, source) must be what the graph's input takes (each input's, for a model of several),
    before any is fed: a GraphError naming the data, the input tensor and both shapes, not TensorFlow's "Cannot feed
    value"."""
    if len(images) == 0:
        return
    for tensor, values in named_samples(images[0:1], graph, key).items():
        expected = graph.shape(tensor)
        if expected is None or as_input(values[:0], graph, tensor).shape[1:] == tuple(expected[1:]):
            continue
        got, dims = list(values.shape[1:]), [None if dim is None or dim < 0 else int(dim) for dim in expected[1:]]
        if len(got) != len(dims) or any(dim is not None and dim != size for dim, size in zip(dims, got)):
            wanted = ", ".join("?" if dim is None else str(dim) for dim in dims)
            # a signal [N, L, C] or token ids [N, L] the importer holds as an image of height 1 (as_input): the model's own
            # shape is the arrays' format, the image's takes the same values
            own = ", ".join("?" if dim is None else str(dim) for dim in dims[1:]) if len(dims) in (2, 3) and dims[0] == 1 else None
            advice = f"[N, {own}] (or [N, {wanted}], the same values)" if own else f"[N, {wanted}]"
            raise GraphError(f"{key}: the samples of {images.source} are {got}, and the model's input {tensor} takes "
                             f"[N, {wanted}]: with data=arrays save them as {advice}; with images set model.preprocess "
                             "(size, channels) to the model's input")

