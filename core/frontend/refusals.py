"""How the importer words what it refuses, so that every refusal names the file, the config key and, in a Keras
model, the layer:

- `ModelImportError` and the config keys the refusals name;
- `strip_wrappers`: a node's name without the scopes a format adds;
- `keras_layer_of`: the Keras layer whose scope holds a node;
- `unsupported_node` words the refusal of a node no IR layer holds (the import stage finds
  it before any later stage runs): the node, its op, its Keras layer where that can be
  told, and the end point that cuts the network before it;
- `check_loops`: a loop (a recurrent layer's `while`) refused naming its layer;
- `missing_packages_refusal`: a .keras file whose layers are classes of packages not installed (keras-hub's).
"""

from __future__ import annotations

import importlib.util
import json
import re
import zipfile
from pathlib import Path
from typing import Iterable, Mapping

from core.frontend.graph import Graph, GraphError, canonical_tensor, tensor_node

# the scopes a SavedModel's (and a Keras export's) function calls put around every node
WRAPPER_PREFIX = re.compile(r"^(?:StatefulPartitionedCall(?:_\d+)?/)+")

FORMAT_KEY = "model.format"
PATH_KEY = "model.file.path"
INPUT_KEY = "model.input_tensor"
END_POINTS_KEY = "model.end_points"
INPUT_SIZE_KEY = "model.preprocess.size"


class ModelImportError(GraphError):
    """A model file or graph that cannot be imported; the message says which and what to do."""


def strip_wrappers(name: str) -> str:
    """`name` without the wrapper scopes a format adds ('StatefulPartitionedCall/x' -> 'x')."""
    return WRAPPER_PREFIX.sub("", name)


# TensorFlow's control flow as a frozen graph holds it: a recurrent layer's `while` over time steps
LOOP_OPS = frozenset({"Enter", "Exit", "NextIteration", "LoopCond", "While", "StatelessWhile"})


def check_loops(origin: str, graph_def, kept: set[str], layer_names: Mapping[str, str] | None) -> None:
    """A loop the end points need is refused naming its Keras layer (TensorFlow's own words would be "the graph has
    a cycle" through an internal node)."""
    loop = next((node for node in graph_def.node if node.name in kept and node.op in LOOP_OPS), None)
    if loop is None:
        return
    name = strip_wrappers(loop.name)
    layer = keras_layer_of(name, layer_names)
    what = f"Keras layer {layer!r} ({layer_names[layer]})" if layer is not None and layer_names else f"node {name} ({loop.op})"
    raise ModelImportError(f"{origin}: {what} runs a loop over time steps (a TensorFlow `while`: node {name}, {loop.op}); the IR "
                           "computes a fixed sequence of layers, and recurrent layers (LSTM, GRU, SimpleRNN) are not taken yet. "
                           f"Set {END_POINTS_KEY} to a tensor before it to convert the network up to it, or replace the layer "
                           "(a Conv1D over time is taken)")


# --- refusing what no IR layer holds -------------------------------------------
def keras_layer_of(node_name: str, layer_names: Iterable[str] | None) -> str | None:
    """The Keras layer whose scope holds the node: Keras names a layer's ops '<model>/<layer>/...',
    the scope possibly with a '_<n>' suffix that the layer's name lacks."""
    known = set(layer_names or ())
    for part in node_name.split("/")[:-1]:
        for candidate in (part, re.sub(r"_\d+$", "", part)):
            if candidate in known:
                return candidate
    return None


# the Keras layers whose TensorFlow ops the IR's patterns hold (README: Your own model)
KERAS_LAYERS = ("Conv2D", "DepthwiseConv2D", "SeparableConv2D", "Conv2DTranspose", "Conv1D", "SeparableConv1D", "Dense",
                "BatchNormalization (after a conv or dense layer, or anywhere per channel)", "Normalization", "Rescaling",
                "Activation and ReLU, LeakyReLU, ELU, Softmax (relu, relu6, sigmoid, hard_sigmoid, tanh, swish/silu, hard_swish, gelu, "
                "elu, selu, softplus, softsign)", "Add", "Multiply", "Concatenate", "MaxPooling1D/2D", "AveragePooling1D/2D",
                "GlobalAveragePooling1D/2D", "GlobalMaxPooling1D/2D", "ZeroPadding2D", "UpSampling2D", "Resizing", "Flatten", "Reshape", "Dropout",
                "LayerNormalization (over the channels)")


def unsupported_node(origin: str, graph: Graph, prepared: Graph, node_name: str, reason: str,
                     layer_names: Mapping[str, str] | None) -> ModelImportError:
    """The refusal of node `node_name` of the prepared (folded, canonical) graph: the Keras layer it came from
    and the layers the importer takes (a Keras model), else the node and its name scope; and the end point(s) of
    the imported graph that stop the network before it."""
    original = graph.by_name()
    node = prepared.by_name()[node_name]
    layer = keras_layer_of(node.name, layer_names)
    cut = _cut_before(prepared, node, original)
    advice = (f"To convert the network up to it, set {END_POINTS_KEY}=[{', '.join(cut)}] (what it reads)"
              if cut else "It reads the network input directly: nothing before it can be converted on its own")
    if layer is not None and isinstance(layer_names, Mapping):
        return ModelImportError(f"{origin}: Keras layer {layer!r} ({layer_names[layer]}) cannot be expressed in the IR; the importer "
                                f"takes the Keras layers {', '.join(KERAS_LAYERS)}. What failed: node {node.name} ({node.op}): "
                                f"{reason}\n{advice}, or replace the layer in the model.")
    where = f" (Keras layer {layer!r})" if layer else (f" (name scope {node.name.rsplit('/', 1)[0]!r})" if "/" in node.name else "")
    return ModelImportError(f"{origin}: node {node.name} ({node.op}){where} cannot be expressed in the IR: {reason}\n"
                            f"{advice}, or replace it in the model.")


def _cut_before(prepared: Graph, node, original: dict) -> list[str]:
    """The activation tensors `node` reads, each traced back to one the imported graph has
    (rewrites add nodes of their own) and that is not the network input."""
    by_name, cut, stack, seen = prepared.by_name(), [], list(node.inputs), set()
    while stack:
        tensor = canonical_tensor(stack.pop(0))
        producer = by_name.get(tensor_node(tensor))
        if tensor in seen or producer is None or producer.op in ("Const", "Placeholder"):
            continue
        seen.add(tensor)
        if tensor_node(tensor) in original and original[tensor_node(tensor)].op == producer.op:
            cut.append(tensor)
        else:
            stack.extend(producer.inputs)
    return cut


# how a package a .keras file's layers come from is installed beside the toolchain, where pip's own resolution would
# replace the toolchain's pins (keras-hub asks the full `tensorflow` through tensorflow-text: Makefile, setup-keras-hub)
INSTALLS = {"keras_hub": "for keras_hub, `make setup-keras-hub`, then run with PYTHONPATH=.venv/keras_hub"}

# what a .keras file's config.json may take to read: the architecture, not the weights
KERAS_CONFIG_BYTES = 64 * 2**20


def missing_packages_refusal(path: Path) -> str | None:
    """Why a .keras file does not load when its layers come from packages not installed (keras-hub's models are classes
    of `keras_hub`): the packages, the modules the file names of each, and the two routes; None where none is missing or
    the file is no .keras archive. Its config.json is read as data (JSON), never run."""
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("config.json")
            if info.file_size > KERAS_CONFIG_BYTES:
                return None
            config = json.loads(archive.read(info))
    except (OSError, KeyError, ValueError, RecursionError, zipfile.BadZipFile):
        return None
    modules: dict[str, set[str]] = {}
    stack = [config]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            module = node.get("module")
            if isinstance(module, str) and module:
                modules.setdefault(module.split(".")[0], set()).add(module)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    missing = {package: names for package, names in modules.items() if importlib.util.find_spec(package) is None}
    if not missing:
        return None
    named = "; ".join(f"{package} ({', '.join(sorted(names)[:3])}{', ...' if len(names) > 3 else ''})" for package, names in sorted(missing.items()))
    plain = " ".join(package.replace("_", "-") for package in sorted(missing) if package not in INSTALLS)
    routes = [INSTALLS[package] for package in sorted(missing) if package in INSTALLS]
    routes += [f"install them into the toolchain's environment (.venv/bin/pip install {plain})"] if plain else []
    advice = "; ".join(routes)
    return (f"its layers are classes of packages that are not installed: {named}. {advice[:1].upper()}{advice[1:]}; or export "
            "the model where they are installed as a SavedModel (model.export('model_dir')) and import that: "
            "model.format=saved_model model.file.path=model_dir")
