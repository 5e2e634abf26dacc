"""Model files -> the project's `Graph`.

Two steps, kept apart so the second also serves graphs built in code:

- `load_graph_def` reads a frozen GraphDef, a SavedModel, a `.keras` file or a `.tflite` flatbuffer and freezes it to a
  TF1 GraphDef (its function calls inlined: function_calls.py), with the input/end points its signature defines.
- `import_graph` checks the configured input and end points against that GraphDef, keeps only what computes the end
  points and drops Identity and IdentityN nodes, so every error names the model and the config key. Node names lose
  the wrapper prefixes a format adds (`StatefulPartitionedCall/...` in a SavedModel), in the graph and in the
  configured names alike: the same model gives the same names in every format.
- what it refuses is worded in refusals.py.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from core.frontend.function_calls import inlined_calls
from core.frontend.graph import Graph, GraphError, canonical_tensor, tensor_index, tensor_node
from core.frontend.keras2 import compatible_layers, keyword_refusal
from core.frontend.recurrent import unrolled
from core.frontend.refusals import (END_POINTS_KEY, FORMAT_KEY, INPUT_KEY, INPUT_SIZE_KEY, PATH_KEY, ModelImportError, check_loops,
                                    missing_packages_refusal, strip_wrappers)
from core.frontend.tflite import TfliteError, read_tflite
from core.frontend.tflite_graph import tflite_graph_def
from core.limits import BudgetError, MemoryBudget, elements, human_bytes

FORMATS = ("frozen_graph", "saved_model", "keras", "tflite")

@dataclass
class LoadedModel:
    graph_def: Any  # tf.compat.v1.GraphDef
    # what the file's own signature names (a frozen graph: its one Placeholder, the outputs nothing reads); a model of
    # several inputs: their list, in the model's order
    default_input_tensor: str | list[str] | None = None
    default_end_points: list[str] | None = None
    layer_names: dict[str, str] | None = None  # a Keras model's layers (nested models' too) -> their classes, to name a node's layer
    # a pre-quantized file's exact scales and zero points, by FakeQuant node (fake_quant.EXACT_PARAMETERS)
    fake_quant_parameters: dict[str, dict[str, list]] | None = None


# --- loading --------------------------------------------------------------------
_FORMAT_WORDS = {
    "frozen_graph": "binary frozen TensorFlow GraphDef (.pb)",
    "saved_model": "SavedModel directory (containing saved_model.pb)",
    "keras": "Keras model file (.keras, or a Keras 2 .h5)",
    "tflite": "TensorFlow Lite flatbuffer (.tflite), int8 or float",
}


def load_graph_def(fmt: str, path: Path, budget: MemoryBudget | None = None) -> LoadedModel:
    """Read `path` as `fmt` and return a frozen TF1 GraphDef plus its signature's tensors.
    Its size is checked against `budget` before a byte is read."""
    loaders = {"frozen_graph": _load_frozen_graph, "saved_model": _load_saved_model, "keras": _load_keras, "tflite": _load_tflite}
    if fmt not in loaders:
        raise ModelImportError(f"{path}: unknown model format {fmt!r}; expected one of {', '.join(FORMATS)}; fix {FORMAT_KEY}")
    path = Path(path)
    if not path.exists():
        raise ModelImportError(f"{path}: no such file or directory; expected a {_FORMAT_WORDS[fmt]}; fix {PATH_KEY}")
    if not (path.is_file() or path.is_dir()):  # /dev/zero, a pipe: would be read until memory runs out
        raise ModelImportError(f"{path}: not a regular file or directory; expected a {_FORMAT_WORDS[fmt]}; fix {PATH_KEY}")
    if budget is not None:
        size = path.stat().st_size if path.is_file() else sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        budget.check(f"model file {path}", size)
    return loaders[fmt](path)


def _load_frozen_graph(path: Path) -> LoadedModel:
    if path.is_dir():
        hint = f" It looks like a SavedModel: set {FORMAT_KEY} to saved_model." if _is_saved_model_dir(path) else ""
        raise ModelImportError(f"{path}: is a directory; expected a {_FORMAT_WORDS['frozen_graph']}.{hint} Or fix {PATH_KEY}")
    graph_def = _parse_graph_def(path.read_bytes())
    if graph_def is None:
        raise ModelImportError(
            f"{path}: not a graph; expected a {_FORMAT_WORDS['frozen_graph']} as written by "
            "tf.io.write_graph(..., as_text=False) or freeze_graph. For a SavedModel directory or a .keras file "
            f"set {FORMAT_KEY} to saved_model or keras"
        )
    return LoadedModel(graph_def, *_graph_ends(graph_def))


def _graph_ends(graph_def) -> tuple[str | None, list[str] | None]:
    """What a frozen graph, which has no signature, offers as its ends: its one Placeholder, and
    the outputs no node reads (a Keras model's final Identity). None where it has no such one."""
    placeholders = [node.name for node in graph_def.node if node.op == "Placeholder"]
    read = {tensor_node(tensor) for node in graph_def.node for tensor in node.input}
    sinks = [f"{node.name}:0" for node in graph_def.node if node.name not in read and node.op not in ("Const", "NoOp", "Placeholder")]
    return (f"{placeholders[0]}:0" if len(placeholders) == 1 else None), (sinks or None)


def _parse_graph_def(data: bytes):
    """The GraphDef in `data`, or None when the bytes are not one."""
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    graph_def = tf.compat.v1.GraphDef()
    try:
        graph_def.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError):
        return None
    # protobuf accepts some garbage as unknown fields; a real GraphDef has named, typed nodes
    if not graph_def.node or any(not node.name or not node.op for node in graph_def.node):
        return None
    return graph_def


def _is_saved_model_dir(path: Path) -> bool:
    return (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file()


def _load_saved_model(path: Path) -> LoadedModel:
    import tensorflow as tf

    if not path.is_dir() or not _is_saved_model_dir(path):
        what = "is a file" if path.is_file() else "has no saved_model.pb"
        raise ModelImportError(
            f"{path}: {what}; expected a {_FORMAT_WORDS['saved_model']}, as written by tf.saved_model.save "
            f"or keras Model.export. Point {PATH_KEY} at that directory"
        )
    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as error:  # TF raises many kinds here; all mean the same to the user
        raise ModelImportError(f"{path}: the SavedModel does not load ({error}); re-export it with tf.saved_model.save") from error
    signature = _serving_signature(path, loaded.signatures)
    return _freeze(signature, path)


def _serving_signature(path: Path, signatures):
    if "serving_default" in signatures:
        return signatures["serving_default"]
    if len(signatures) == 1:
        return next(iter(signatures.values()))
    found = ", ".join(sorted(signatures)) or "none"
    raise ModelImportError(
        f"{path}: no serving_default signature (signatures: {found}); expected one to freeze. "
        "Save with tf.saved_model.save(module, dir, signatures={'serving_default': fn})"
    )


def _load_keras(path: Path) -> LoadedModel:
    import keras
    import tensorflow as tf

    try:  # safe_mode: no Lambda bytecode from the file; a Keras 2 .h5's known keywords read as Keras 3 takes them
        model = keras.models.load_model(str(path), compile=False, safe_mode=True, custom_objects=compatible_layers(keras.layers))
    except Exception as error:  # keras raises ValueError, OSError, zip errors...: all mean "not loadable"
        why = keyword_refusal(error) or missing_packages_refusal(path) or (
            f"the Keras model does not load ({error}); expected a {_FORMAT_WORDS['keras']} saved with "
            "model.save('model.keras'). Custom layers must be importable")
        raise ModelImportError(f"{path}: {why}") from error
    try:
        model = unrolled(model, keras)
    except GraphError as error:
        raise ModelImportError(f"{path}: {error}") from None
    specs = _keras_input_specs(path, model)
    if len(specs) == 1:
        function = tf.function(lambda x: model(x, training=False), input_signature=specs)
    else:  # a functional model of several inputs takes them as a list, in model.inputs' order
        function = tf.function(lambda *xs: model(list(xs), training=False), input_signature=specs)
    loaded = _freeze(function.get_concrete_function(), path)
    loaded.layer_names = _keras_layer_names(model)
    return loaded


def _load_tflite(path: Path) -> LoadedModel:
    """The .tflite as TensorFlow ops, its int8 quantization as FakeQuant nodes (core/frontend/tflite_graph.py)."""
    try:
        graph_def, input_tensor, end_points, parameters = tflite_graph_def(read_tflite(path))
    except TfliteError as error:
        raise ModelImportError(str(error)) from None
    return LoadedModel(graph_def, input_tensor, end_points, fake_quant_parameters=parameters or None)


def _keras_layer_names(model) -> dict[str, str]:
    names, stack = {}, list(getattr(model, "layers", []))
    while stack:
        layer = stack.pop(0)
        names[layer.name] = type(layer).__name__
        stack.extend(getattr(layer, "layers", []))
    return names


def _keras_input_specs(path: Path, model) -> list:
    """One TensorSpec per Keras input, in model.inputs' order, each named as the Keras input is (the Placeholder's name,
    and the name a model of several inputs is fed by: data=arrays' `<split>/<name>`)."""
    import tensorflow as tf

    try:
        inputs = model.inputs
    except (AttributeError, ValueError) as error:
        raise ModelImportError(f"{path}: the Keras model has no defined input; build it with keras.Input(shape=...)") from error
    if not inputs:
        raise ModelImportError(f"{path}: the Keras model has no inputs; build it with keras.Input(shape=...)")
    specs, taken = [], set()
    for position, tensor in enumerate(inputs):
        name = tensor.name if _TF_OP_NAME.fullmatch(tensor.name or "") else f"input_{position}" if len(inputs) > 1 else "input"
        if name in taken:
            raise ModelImportError(f"{path}: two Keras inputs are named {name!r}; give each keras.Input a name of its own")
        taken.add(name)
        specs.append(tf.TensorSpec((None, *tuple(tensor.shape)[1:]), tensor.dtype, name=name))
    return specs


_TF_OP_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-/]*")


def _freeze(concrete_function, path: Path) -> LoadedModel:
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    try:
        frozen = convert_variables_to_constants_v2(concrete_function)
    except Exception as error:
        raise ModelImportError(f"{path}: the model could not be frozen to constants ({error})") from error
    inputs = [tensor.name for tensor in frozen.inputs]
    if not inputs:
        raise ModelImportError(f"{path}: the model's signature has no inputs; expected the network's input(s)")
    return LoadedModel(inlined_calls(frozen.graph.as_graph_def(), str(path)), inputs[0] if len(inputs) == 1 else inputs, [tensor.name for tensor in frozen.outputs])


# --- importing ------------------------------------------------------------------
def import_graph(graph_def, input_tensor: str | list[str] | None, end_points: Iterable[str], *, origin: str, source: dict,
                 budget: MemoryBudget | None = None, layer_names: Mapping[str, str] | None = None,
                 input_size: tuple[int, int] | None = None) -> Graph:
    """Check, prune and clean `graph_def`, then return it as a `Graph` with static shapes. `input_tensor`: the network's
    input, or the list of a model of several inputs, in its order.
    The constants' declared sizes are checked against `budget` before one is made. `layer_names`: a Keras
    model's layers, to name the one a refused node comes from. `input_size`: [H, W] of an image input whose size
    the model leaves open (Keras' Input((None, None, 3))), fixed to it (model.preprocess.size)."""
    if budget is not None:
        check_constants(origin, graph_def, budget)
    graph_def, casts = _in_float32(graph_def)
    if casts:
        source = {**source, "float16_casts_removed": casts}
    graph_def, renamed = _without_wrapper_prefixes(graph_def)
    inputs = [input_tensor] if isinstance(input_tensor, str) else list(input_tensor or [])
    inputs = [_configured_name(tensor, renamed) for tensor in inputs if tensor]
    end_points = [_configured_name(tensor, renamed) for tensor in end_points]
    by_name = {node.name: node for node in graph_def.node}
    if not by_name:
        raise ModelImportError(f"{origin}: the graph is empty (no nodes); expected a frozen inference graph")
    if not end_points:
        raise ModelImportError(f"{origin}: no end points given; set {END_POINTS_KEY} to the output tensor(s) of the network")
    if not inputs:
        placeholders = [name for name, node in by_name.items() if node.op == "Placeholder"]
        raise ModelImportError(f"{origin}: no input tensor given, and the graph has {len(placeholders)} Placeholders "
                               f"({', '.join(placeholders[:10]) or 'none'}); set {INPUT_KEY}")
    for tensor in inputs:
        _check_input(origin, by_name, tensor)
    _check_end_points(origin, by_name, end_points)

    resolved = {canonical_tensor(t): canonical_tensor(_skip_identities(origin, by_name, t)) for t in end_points}
    kept = _needed_nodes(origin, by_name, resolved.values())
    _check_placeholders(origin, by_name, kept, inputs)
    check_loops(origin, graph_def, kept, layer_names)

    source = dict(source)
    aliases = {given: actual for given, actual in resolved.items() if given != actual}
    if aliases:
        source["end_point_aliases"] = aliases
    pruned = _pruned_graph_def(origin, graph_def, by_name, kept)
    fixed = [shape for shape in (_fix_input_size(origin, pruned, tensor, input_size) for tensor in inputs) if shape]
    if fixed:
        source["input_size_fixed"] = fixed[0] if len(inputs) == 1 else fixed
    import tensorflow as tf

    try:
        graph = Graph.from_graph_def(pruned, inputs, list(dict.fromkeys(resolved.values())), source)
        graph.infer_shapes()
    except (ValueError, TypeError, tf.errors.OpError) as error:  # a malformed node: TensorFlow's words, our frame
        raise ModelImportError(f"{origin}: TensorFlow refuses the graph ({type(error).__name__}: {error}); expected a valid "
                               "frozen inference graph") from error
    _check_output_indices(origin, graph)
    return graph


def check_constants(origin: str, graph_def, budget: MemoryBudget) -> None:
    """A Const declares its shape; a scalar value broadcast to it costs the whole shape once made."""
    import tensorflow as tf

    total, largest = 0, (0, "")
    for node in graph_def.node:
        if node.op != "Const":
            continue
        tensor = node.attr["value"].tensor
        dims = [dim.size for dim in tensor.tensor_shape.dim]
        try:
            item = tf.as_dtype(tensor.dtype).size
        except TypeError:
            raise ModelImportError(f"{origin}: constant {node.name} has dtype enum {tensor.dtype}, which TensorFlow does not know") from None
        if any(dim < 0 for dim in dims):
            raise ModelImportError(f"{origin}: constant {node.name} declares the shape {dims}; a constant's dimensions are known")
        size = elements(dims) * max(1, item)
        total += size
        largest = max(largest, (size, f"{node.name} {dims}"))
    try:
        budget.check(f"{origin}: the constants (largest {largest[1]}, {human_bytes(largest[0])})", total)
    except BudgetError as error:
        raise ModelImportError(str(error)) from None


def _check_output_indices(origin: str, graph: Graph) -> None:
    by_name = graph.by_name()
    for tensor in graph.end_points:
        outputs = len(by_name[tensor_node(tensor)].output_shapes)
        if tensor_index(tensor) >= outputs:
            raise ModelImportError(
                f"{origin}: end point {tensor!r}: node {tensor_node(tensor)!r} has {outputs} output(s); fix {END_POINTS_KEY}"
            )


def _suggest(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=5, cutoff=0.5)
    return f" Closest node names: {', '.join(close)}." if close else ""


def _check_input(origin: str, by_name: dict, input_tensor: str) -> None:
    name = tensor_node(input_tensor)
    placeholders = [n for n, node in by_name.items() if node.op == "Placeholder"]
    listed = f" Placeholders in the graph: {', '.join(placeholders) or 'none'}."
    if name not in by_name:
        raise ModelImportError(
            f"{origin}: input tensor {input_tensor!r} not found: no node named {name!r}.{_suggest(name, by_name)}{listed} Fix {INPUT_KEY}"
        )
    if by_name[name].op != "Placeholder":
        raise ModelImportError(
            f"{origin}: input tensor {input_tensor!r} is produced by a {by_name[name].op} node; expected a Placeholder "
            f"(the network's input).{listed} Fix {INPUT_KEY}"
        )


def _check_end_points(origin: str, by_name: dict, end_points: list[str]) -> None:
    missing = [t for t in end_points if tensor_node(t) not in by_name]
    if missing:
        lines = "; ".join(f"{t!r}.{_suggest(tensor_node(t), by_name)}" for t in missing)
        raise ModelImportError(f"{origin}: end point(s) not found in the graph: {lines} Fix {END_POINTS_KEY}")


FORWARDING_OPS = ("Identity", "IdentityN")  # output i is input i: IdentityN wraps a custom gradient (Keras 3's swish/silu)


def _skip_identities(origin: str, by_name: dict, tensor: str) -> str:
    """The tensor an Identity (or IdentityN) chain forwards, so consumers read it directly."""
    seen = set()
    while (node := by_name.get(tensor_node(tensor))) is not None and node.op in FORWARDING_OPS:
        if node.name in seen:
            raise ModelImportError(f"{origin}: the graph has a cycle of Identity nodes through {node.name!r}")
        seen.add(node.name)
        data_inputs = [t for t in node.input if not t.startswith("^")]
        if tensor_index(tensor) >= max(1, len(data_inputs)) or (node.op == "Identity" and tensor_index(tensor) != 0):
            raise ModelImportError(f"{origin}: {tensor!r} does not exist: {node.op} node {node.name!r} has {len(data_inputs)} "
                                   f"output(s); fix {END_POINTS_KEY}")
        if not data_inputs:
            raise ModelImportError(f"{origin}: Identity node {node.name!r} has no data input")
        tensor = data_inputs[tensor_index(tensor)]
    return tensor


def _needed_nodes(origin: str, by_name: dict, end_points: Iterable[str]) -> set[str]:
    """Names of the non-Identity nodes the end points depend on through data edges.

    Control edges are not followed: in a frozen inference graph they only order
    variable reads and NoOps, and the Graph representation drops them anyway.
    """
    kept: set[str] = set()
    stack = [tensor_node(t) for t in end_points]
    while stack:
        name = stack.pop()
        if name in kept:
            continue
        if name not in by_name:
            raise ModelImportError(f"{origin}: a node reads {name!r}, which no node in the graph produces")
        kept.add(name)
        for tensor in by_name[name].input:
            if not tensor.startswith("^"):
                stack.append(tensor_node(_skip_identities(origin, by_name, tensor)))
    return kept


def _check_placeholders(origin: str, by_name: dict, kept: set[str], inputs: list[str]) -> None:
    input_names = [tensor_node(tensor) for tensor in inputs]
    for tensor, name in zip(inputs, input_names):
        if name not in kept:
            raise ModelImportError(
                f"{origin}: the end points do not depend on the input tensor {tensor!r}; "
                f"fix {INPUT_KEY} or {END_POINTS_KEY}"
            )
    others = sorted(n for n in kept if by_name[n].op == "Placeholder" and n not in input_names)
    if others:
        raise ModelImportError(
            f"{origin}: the end points also need placeholder(s) {', '.join(others)} besides the input(s) "
            f"{', '.join(inputs)}; feed them as inputs of the model (a Keras model's inputs are all taken), freeze them to "
            f"constants, or choose {END_POINTS_KEY} that do not depend on them"
        )


def _in_float32(graph_def):
    """(the graph computed in float32, how many float32 <-> float16 Casts it lost): a Keras mixed_float16 model casts
    its weights and activations to float16 around each layer, which only rounds what the calibration measures and
    the int8 model recomputes; nothing float16 is left for the IR's patterns to meet. The graph as it was when it
    has no float16."""
    import tensorflow as tf

    half, single = tf.float16.as_datatype_enum, tf.float32.as_datatype_enum
    if not any(value.type == half or half in value.list.type for node in graph_def.node for value in node.attr.values()):
        return graph_def, 0
    converted, casts = tf.compat.v1.GraphDef(), 0
    converted.CopyFrom(graph_def)
    for node in converted.node:
        if node.op == "Cast" and {node.attr["SrcT"].type, node.attr["DstT"].type} <= {half, single}:
            node.op, casts = "Identity", casts + 1
            for key in ("SrcT", "DstT", "Truncate"):
                node.attr.pop(key, None)
            node.attr["T"].type = single
        for value in node.attr.values():
            if value.type == half:
                value.type = single
            elif value.HasField("list") and half in value.list.type:
                value.list.type[:] = [single if item == half else item for item in value.list.type]
            elif value.HasField("tensor") and value.tensor.dtype == half:
                value.tensor.CopyFrom(tf.make_tensor_proto(tf.make_ndarray(value.tensor).astype(np.float32)))
    return converted, casts


def _pruned_graph_def(origin: str, graph_def, by_name: dict, kept: set[str]):
    """The kept nodes, in file order, reading through Identities and without control edges."""
    import tensorflow as tf

    pruned = tf.compat.v1.GraphDef()
    pruned.versions.CopyFrom(graph_def.versions)
    for node in graph_def.node:
        if node.name not in kept:
            continue
        copy = pruned.node.add()
        copy.CopyFrom(node)
        del copy.input[:]
        copy.input.extend(_tf_tensor_name(_skip_identities(origin, by_name, t)) for t in node.input if not t.startswith("^"))
    return pruned


def _fix_input_size(origin: str, graph_def, input_tensor: str, input_size: tuple[int, int] | None) -> list[int] | None:
    """An image input of unknown height or width [N, ?, ?, C] given `input_size`; the fixed shape, or None when the
    input's size was known. The IR's layers are sized: an open size is refused naming the input and the key."""
    placeholder = next(node for node in graph_def.node if node.name == tensor_node(input_tensor))
    shape = placeholder.attr["shape"].shape
    if shape.unknown_rank or len(shape.dim) != 4 or min(shape.dim[1].size, shape.dim[2].size) >= 0:
        return None
    if input_size is None:
        raise ModelImportError(f"{origin}: the input {input_tensor} is [N, ?, ?, {shape.dim[3].size}]: the model leaves its size open, "
                               f"and the IR computes sized layers; set {INPUT_SIZE_KEY} to the [height, width] to convert it at")
    for axis, size in zip((1, 2), input_size):
        if shape.dim[axis].size < 0:
            shape.dim[axis].size = int(size)
    return [dim.size for dim in shape.dim]


def _tf_tensor_name(tensor: str) -> str:
    """TensorFlow's own spelling of a node input: 'x' for output 0, 'x:1' otherwise."""
    index = tensor_index(tensor)
    return tensor_node(tensor) if index == 0 else f"{tensor_node(tensor)}:{index}"


def _without_wrapper_prefixes(graph_def):
    """The GraphDef with every node name (and input) stripped of its wrapper prefix, except a
    name whose stripped form another node has or would have (a SavedModel's own 'Identity' and
    its function's 'StatefulPartitionedCall/Identity')."""
    stripped_names = [strip_wrappers(node.name) for node in graph_def.node]
    counts: dict[str, int] = {}
    for name in stripped_names:
        counts[name] = counts.get(name, 0) + 1
    renamed = {node.name: new if counts[new] == 1 else node.name for node, new in zip(graph_def.node, stripped_names)}
    if all(old == new for old, new in renamed.items()):
        return graph_def, renamed
    import tensorflow as tf

    stripped = tf.compat.v1.GraphDef()
    stripped.CopyFrom(graph_def)
    for node in stripped.node:
        node.name = renamed[node.name]
        inputs = [_renamed_tensor(tensor, renamed) for tensor in node.input]
        del node.input[:]
        node.input.extend(inputs)
    return stripped, renamed


def _configured_name(tensor: str, renamed: dict[str, str]) -> str:
    """A configured tensor in the stripped graph: a node named as in the file, or with its
    wrapper prefix left out (the same configuration works for every format)."""
    return _renamed_tensor(tensor, renamed) if tensor_node(tensor) in renamed else strip_wrappers(tensor)


def _renamed_tensor(tensor: str, renamed: dict[str, str]) -> str:
    control = "^" if tensor.startswith("^") else ""
    name, _, index = tensor.lstrip("^").partition(":")
    return f"{control}{renamed.get(name, name)}{':' + index if index else ''}"
