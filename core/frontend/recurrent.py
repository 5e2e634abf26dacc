"""Keras' recurrent layers as layers the IR has: LSTM, GRU and SimpleRNN (and Bidirectional wrappers of them) unrolled
over the model's fixed sequence length, then rewritten (core/frontend/canonicalize.py: EARLY_REWRITES):

- `unrolled` (at load, on the Keras model): each recurrent layer rebuilt with `unroll=True`, its weights kept, so the
  graph holds every time step instead of a TensorFlow `while` (which the IR, a fixed sequence of layers, cannot run);
- `zero_states`: the initial state, zeros of the batch's size (a Fill), propagated away: a product with it is zero, a sum
  with it is the other term (a constant then computed on by constant folding, core/frontend/prepare.py);
- `time_steps`: the sequence [N, T, C] unstacked over time (Transpose, Unpack, a ReverseV2 for `go_backwards`) as
  one slice [N, 1, C] per step, Reshaped to [N, C], which the signal lifting holds as a crop of the image;
- `stacked_steps`: the per-step outputs stacked back to a sequence (`return_sequences`: Pack, Transpose, and a
  Bidirectional's ReverseV2 of its backward sequence) as a concatenation along time of [N, 1, U] steps;
- `split_gates`, `sliced_gates`: the gates' pre-activations, one product by the concatenated weights Split in four
  (LSTM's) or sliced by columns (GRU's), as products by each gate's columns, each with its bias: each gate its own
  Dense, and no slice of channels;
- `vector_scales`, `one_minus_sigmoid` (after constant folding): a vector times a constant per unit as the Dense of
  their diagonal; GRU's 1 - sigmoid(g) as sigmoid(-g), g's Dense negated.
"""

from __future__ import annotations

import numpy as np

from core.frontend.graph import Graph, GraphError, Node, canonical_tensor, tensor_node
from core.frontend.rewrite import const_node, constant_of, copy_node, readers_of

FLOAT = {"T": {"type": "float32"}}


# --- the Keras model ---------------------------------------------------------------------------------------------------

def _with_unroll(config: dict) -> dict:
    return {**config, "unroll": True}


def refuse_masks(model, keras_module) -> None:
    """A Keras mask (Masking, Embedding(mask_zero=True)) makes the layers after it skip the masked time steps per sample: a
    recurrent layer carries its state over them, a pooling leaves them out. The IR's layers compute every step alike: a
    GraphError naming the layer."""
    for layer in model.layers:
        if isinstance(layer, keras_module.layers.Masking):
            what = f"masks the time steps whose every feature is {layer.mask_value:g}"
        elif isinstance(layer, keras_module.layers.Embedding) and layer.mask_zero:
            what = "masks the time steps of token id 0 (mask_zero=True)"
        else:
            continue
        raise GraphError(f"Keras layer {layer.name!r} ({type(layer).__name__}) {what}: the layers after it skip those steps sample "
                         "by sample (a recurrent layer carries its state over them, a pooling leaves them out), which the IR's "
                         "layers, computing every step alike, cannot; save the model without the mask (sequences of one fixed "
                         "length, or padding the model was trained to read)")


def unrolled(model, keras_module):
    """`model` with each recurrent layer (inside a Bidirectional too) rebuilt to unroll over time, the same weights; a
    GraphError naming the layer where the sequence length is not fixed, or a mask skips steps. `model` itself when it has none."""
    refuse_masks(model, keras_module)

    def recurrent(layer) -> bool:
        inner = getattr(layer, "forward_layer", None) or layer
        return isinstance(inner, keras_module.layers.RNN) and not inner.unroll

    layers = [layer for layer in model.layers if recurrent(layer)]
    if not layers:
        return model
    for layer in layers:
        length = layer.input.shape[1] if hasattr(layer, "input") else None
        if length is None:
            raise GraphError(f"Keras layer {layer.name!r} ({type(layer).__name__}) runs over a sequence of open length; the IR unrolls a "
                             "recurrent layer over a fixed one: give keras.Input its length")

    def clone(layer):
        config = layer.get_config()
        if recurrent(layer) and isinstance(layer, keras_module.layers.Bidirectional):
            config["layer"] = {**config["layer"], "config": _with_unroll(config["layer"]["config"])}
            if config.get("backward_layer"):
                config["backward_layer"] = {**config["backward_layer"], "config": _with_unroll(config["backward_layer"]["config"])}
            return keras_module.layers.Bidirectional.from_config(config)
        return type(layer).from_config(_with_unroll(config) if recurrent(layer) else config)

    cloned = keras_module.models.clone_model(model, clone_function=clone)
    cloned.set_weights(model.get_weights())
    return cloned


# --- the graph ---------------------------------------------------------------------------------------------------------

def zero_states(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite: the zeros a Fill gives (an unrolled layer's initial state) propagated away: a product with
    them, or a slice of them, is zero, a sum with them its other term (its readers read that term)."""
    zeros: set[str] = set()
    aliases: dict[str, str] = {}  # a sum with zeros -> its other term
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        if node.op == "Fill" and (value := constant_of(graph, by_name, node.inputs[1])) is not None and not np.any(value):
            zeros.add(f"{node.name}:0")
            continue
        inputs = [aliases.get(canonical_tensor(tensor), tensor) for tensor in node.inputs]
        read = [canonical_tensor(tensor) in zeros for tensor in inputs]
        if any(read) and f"{node.name}:0" in graph.end_points:
            return {}, {}, []  # an output computed from zeros: kept
        if node.op in ("MatMul", "Mul") and any(read) or node.op in ("StridedSlice", "Reshape", "Identity") and read[0]:
            zeros.add(f"{node.name}:0")
            replacements[node.name] = []
        elif node.op in ("Add", "AddV2") and read.count(True) == 1:
            other = inputs[read.index(False)]
            value = constant_of(graph, by_name, other)
            if value is None:
                aliases[f"{node.name}:0"] = other
                replacements[node.name] = []
            else:  # zeros plus a constant (GRU's recurrent bias at the first step): the constant, one row of the batch
                constants[node.name] = value.reshape(1, -1).astype(np.float32)
                replacements[node.name] = [const_node(node.name, constants[node.name])]
        elif any(read):
            return {}, {}, []  # zeros read otherwise: left as they are (the Fill is then refused, naming its layer)
        elif inputs != node.inputs:
            replacements[node.name] = [copy_node(node, inputs=inputs)]
    if zeros:
        notes.append(f"{len(zeros)} zero state tensor(s) propagated: {len(replacements)} products and sums removed or rewired")
    return replacements, constants, notes


def _rewired(replacements: dict, readers, tensor: str, source: str) -> None:
    """Each reader of `tensor` reads `source` instead (its replacement, where it has one already, edited)."""
    for reader, position in readers.get(tensor, []):
        rewired = replacements.get(reader.name, [copy_node(reader)])[-1]
        rewired.inputs[position] = source
        replacements[reader.name] = [rewired]


def _sequence_of(graph: Graph, by_name: dict[str, Node], unpack: Node) -> tuple[str, bool] | None:
    """(the [N, T, C] sequence, whether it is read backwards) an Unpack over time steps unstacks."""
    source = by_name.get(tensor_node(unpack.inputs[0]))
    backwards = source is not None and source.op == "ReverseV2" and list(np.reshape(constant_of(graph, by_name, source.inputs[1]), -1)) == [0]
    if backwards:
        source = by_name.get(tensor_node(source.inputs[0]))
    if source is None or source.op != "Transpose" or int(unpack.attr("axis", 0)) != 0:
        return None
    permutation = constant_of(graph, by_name, source.inputs[1])
    shape = graph.shape(source.inputs[0])
    if permutation is None or list(permutation.reshape(-1)) != [1, 0, 2] or shape is None or len(shape) != 3 or min(shape[1:]) < 1:
        return None
    return source.inputs[0], backwards


def time_steps(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite: a sequence unstacked over time as a slice per step."""
    replacements, constants, notes = {}, {}, []
    readers = readers_of(graph)
    steps: dict[str, str] = {}  # 'unstack:k' -> the step's tensor
    for node in graph.nodes:
        found = _sequence_of(graph, by_name, node) if node.op == "Unpack" else None
        if found is None:
            continue
        sequence, backwards = found
        length, channels = graph.shape(sequence)[1:]
        nodes = []
        for output in range(length):
            time = length - 1 - output if backwards else output
            name = f"{node.name}/step_{time}"
            for part, value in (("begin", [0, time, 0]), ("end", [0, time + 1, 0]), ("strides", [1, 1, 1]), ("shape", [-1, channels])):
                constants[f"{name}/{part}"] = np.asarray(value, np.int32)
                nodes.append(const_node(f"{name}/{part}", constants[f"{name}/{part}"]))
            nodes += [Node(f"{name}/slice", "StridedSlice", [sequence, f"{name}/begin", f"{name}/end", f"{name}/strides"],
                           {**FLOAT, "Index": {"type": "int32"}, "begin_mask": {"i": 5}, "end_mask": {"i": 5}, "ellipsis_mask": {"i": 0},
                            "new_axis_mask": {"i": 0}, "shrink_axis_mask": {"i": 0}}),
                      Node(name, "Reshape", [f"{name}/slice", f"{name}/shape"], {**FLOAT, "Tshape": {"type": "int32"}})]
            steps[f"{node.name}:{output}"] = f"{name}:0"
        replacements[node.name] = nodes
        notes.append(f"{node.name}: {length} time steps of {sequence}{' (backwards)' if backwards else ''} as slices")
    for tensor, step in steps.items():
        _rewired(replacements, readers, tensor, step)
    return replacements, constants, notes


def stacked_steps(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite: per-step outputs [N, U] stacked to a sequence (Pack over time, Transpose to [N, T, U]) as a
    concatenation along time of [N, 1, U] steps."""
    replacements, constants, notes = {}, {}, []
    readers = readers_of(graph)
    for node in graph.nodes:
        pack = by_name.get(tensor_node(node.inputs[0])) if node.op == "Transpose" else None
        permutation = constant_of(graph, by_name, node.inputs[1]) if pack is not None else None
        if pack is None or pack.op != "Pack" or int(pack.attr("axis", 0)) != 0 or permutation is None or \
                list(permutation.reshape(-1)) != [1, 0, 2]:
            continue
        units = graph.shape(node.inputs[0])[2]
        steps = list(enumerate(pack.inputs))
        # a backward layer's sequence put back in time order (Bidirectional's ReverseV2 along time): the steps reversed
        reverse = [reader for reader, _ in readers.get(f"{node.name}:0", [])]
        if len(reverse) == 1 and reverse[0].op == "ReverseV2" and \
                [int(axis) % 3 for axis in np.reshape(constant_of(graph, by_name, reverse[0].inputs[1]), -1)] == [1]:
            replacements[node.name], node, steps = [], reverse[0], steps[::-1]
        constants[f"{node.name}/stacked_step_shape"] = np.asarray([-1, 1, units], np.int32)
        constants[f"{node.name}/stacked_axis"] = np.asarray(1, np.int32)
        nodes = [const_node(f"{node.name}/stacked_step_shape", constants[f"{node.name}/stacked_step_shape"]),
                 const_node(f"{node.name}/stacked_axis", constants[f"{node.name}/stacked_axis"])]
        for time, step in steps:
            nodes.append(Node(f"{node.name}/stacked_step_{time}", "Reshape", [step, f"{node.name}/stacked_step_shape"], {**FLOAT, "Tshape": {"type": "int32"}}))
        nodes.append(Node(node.name, "ConcatV2", [*(f"{node.name}/stacked_step_{time}:0" for time, _ in steps), f"{node.name}/stacked_axis"],
                          {**FLOAT, "N": {"i": len(steps)}, "Tidx": {"type": "int32"}}))
        replacements[node.name] = nodes
        notes.append(f"{node.name}: {len(pack.inputs)} steps stacked (Pack, Transpose) as a concatenation along time")
    return replacements, constants, notes


def _linear_terms(graph: Graph, by_name: dict[str, Node], readers, tensor: str,
                  top: bool = False) -> tuple[list[tuple[str, np.ndarray]], np.ndarray] | None:
    """The products (activation, constant [K, M] weight) and the constant bias whose sum is `tensor`, through Add, AddV2,
    BiasAdd and Identity nodes each read only along this chain (the `top` one by anything); None otherwise."""
    node = by_name.get(tensor_node(tensor))
    if node is None:
        return None
    if node.op == "MatMul" and not node.attr("transpose_a", False) and not node.attr("transpose_b", False):
        weight = constant_of(graph, by_name, node.inputs[1])
        return None if weight is None or weight.ndim != 2 else ([(node.inputs[0], weight)], np.zeros(weight.shape[1], np.float32))
    if node.op not in ("Add", "AddV2", "BiasAdd", "Identity") or not top and len(readers.get(f"{node.name}:0", [])) != 1:
        return None
    terms, bias = [], None
    for operand in node.inputs:
        value = constant_of(graph, by_name, operand)
        if value is not None:
            bias = value.reshape(-1) if bias is None else bias + value.reshape(-1)
            continue
        found = _linear_terms(graph, by_name, readers, operand)
        if found is None:
            return None
        terms += found[0]
        bias = found[1] if bias is None else bias + found[1]
    return terms, bias


def _gate(name: str, terms: list[tuple[str, np.ndarray]], bias: np.ndarray, columns: slice, constants: dict) -> list[Node]:
    """Nodes computing the `columns` of sum(x W) + bias as a Dense per product (the bias on the first) and their sum, the
    last named `name`."""
    nodes, sums = [], []
    for term, (source, weight) in enumerate(terms):
        product = f"{name}/term_{term}"
        constants[f"{product}/weight"] = np.ascontiguousarray(weight[:, columns], np.float32)
        nodes += [const_node(f"{product}/weight", constants[f"{product}/weight"]),
                  Node(product, "MatMul", [source, f"{product}/weight"], {**FLOAT, "transpose_a": {"b": False}, "transpose_b": {"b": False}})]
        if term == 0:  # the bias on the first product, where the Dense takes it
            constants[f"{product}/bias"] = np.ascontiguousarray(bias[columns], np.float32)
            nodes += [const_node(f"{product}/bias", constants[f"{product}/bias"]),
                      Node(f"{product}/biased", "BiasAdd", [f"{product}:0", f"{product}/bias"], {**FLOAT, "data_format": {"s": "NHWC"}})]
        sums.append(f"{nodes[-1].name}:0")
    for term, addend in enumerate(sums[1:], start=1):
        nodes.append(Node(name if term == len(sums) - 1 else f"{name}/sum_{term}", "AddV2", [sums[0], addend], FLOAT))
        sums[0] = f"{nodes[-1].name}:0"
    if len(sums) == 1:  # the gate is its biased product
        nodes[-1] = copy_node(nodes[-1], name=name)
    return nodes


def split_gates(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite: Split(x W + h U + b) along the units (LSTM's four gates) as each gate's x W_j + b_j + h U_j."""
    replacements, constants, notes = {}, {}, []
    readers = readers_of(graph)
    for node in graph.nodes:
        axis = constant_of(graph, by_name, node.inputs[0]) if node.op == "Split" else None
        shape = graph.shape(node.inputs[1]) if axis is not None else None
        if shape is None or len(shape) != 2 or int(axis) % 2 != 1:
            continue
        found = _linear_terms(graph, by_name, readers, node.inputs[1], top=True)
        count = int(node.attr("num_split", 0))
        if found is None or not found[0] or count < 1 or shape[1] % count:
            continue
        width = shape[1] // count
        replacements[node.name] = [new for gate in range(count)
                                   for new in _gate(f"{node.name}/gate_{gate}", *found, slice(gate * width, (gate + 1) * width), constants)]
        for gate in range(count):
            _rewired(replacements, readers, f"{node.name}:{gate}", f"{node.name}/gate_{gate}:0")
        notes.append(f"{node.name}: {count} gates of {len(found[0])} product(s) each, the weights' columns split")
    return replacements, constants, notes


def _columns(graph: Graph, by_name: dict[str, Node], node: Node) -> slice | None:
    """The columns a StridedSlice keeps of a [N, M] tensor, all its rows, stride 1 (GRU's gates of x W + b)."""
    shape = graph.shape(node.inputs[0])
    begin, end, strides = (constant_of(graph, by_name, tensor) for tensor in node.inputs[1:4])
    masks = [int(node.attr(key, 0)) for key in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask")]
    if shape is None or len(shape) != 2 or shape[1] < 1 or begin is None or end is None or strides is None or any(masks) \
            or begin.size != 2 or np.any(strides != 1) or not int(node.attr("begin_mask", 0)) & 1 or not int(node.attr("end_mask", 0)) & 1:
        return None
    first = 0 if int(node.attr("begin_mask", 0)) & 2 else int(begin[1]) % shape[1]
    last = shape[1] if int(node.attr("end_mask", 0)) & 2 else (int(end[1]) if int(end[1]) >= 0 else shape[1] + int(end[1]))
    return slice(first, min(last, shape[1])) if first < min(last, shape[1]) else None


def sliced_gates(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite: a slice of the columns of x W + h U + b (GRU's gates) as that slice's x W_j + b_j + h U_j."""
    replacements, constants, notes = {}, {}, []
    readers = readers_of(graph)
    for node in graph.nodes:
        columns = _columns(graph, by_name, node) if node.op == "StridedSlice" else None
        found = _linear_terms(graph, by_name, readers, node.inputs[0], top=True) if columns is not None else None
        if found is None or not found[0]:
            continue
        replacements[node.name] = _gate(node.name, *found, columns, constants)
        notes.append(f"{node.name}: columns {columns.start}:{columns.stop} of {len(found[0])} product(s) as a Dense each")
    return replacements, constants, notes


def vector_scales(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite, after constant folding: a vector [N, C] times a constant per unit (GRU's reset gate times
    its recurrent bias at the first step, when the state is zero) as the Dense of the diagonal weight: exact (one
    product per output), a layer every target has."""
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        if node.op != "Mul" or len(node.inputs) != 2:
            continue
        values = [constant_of(graph, by_name, tensor) for tensor in node.inputs]
        if (values[0] is None) == (values[1] is None):
            continue
        source, scale = (node.inputs[0], values[1]) if values[1] is not None else (node.inputs[1], values[0])
        shape = graph.shape(source)
        if shape is None or len(shape) != 2 or shape[1] < 2 or scale.size != shape[1]:
            continue
        constants[f"{node.name}/diagonal"] = np.diag(scale.reshape(-1)).astype(np.float32)
        replacements[node.name] = [const_node(f"{node.name}/diagonal", constants[f"{node.name}/diagonal"]),
                                   Node(node.name, "MatMul", [source, f"{node.name}/diagonal"],
                                        {**FLOAT, "transpose_a": {"b": False}, "transpose_b": {"b": False}})]
        notes.append(f"{node.name}: a vector times {shape[1]} constants as the Dense of their diagonal")
    return replacements, constants, notes


def one_minus_sigmoid(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite, after constant folding: 1 - sigmoid(x W + b) (GRU's 1 - z) as sigmoid(x (-W) - b), the gate's
    Dense negated: one sigmoid table, which every target has (TFLite's LOGISTIC), not a sigmoid and an affine map
    rounded twice."""
    replacements, constants, notes = {}, {}, []
    readers = readers_of(graph)
    for node in graph.nodes:
        one = constant_of(graph, by_name, node.inputs[0]) if node.op == "Sub" else None
        sigmoid = by_name.get(tensor_node(node.inputs[1])) if one is not None and one.size == 1 and float(one) == 1.0 else None
        found = (_linear_terms(graph, by_name, readers, sigmoid.inputs[0], top=True)
                 if sigmoid is not None and sigmoid.op == "Sigmoid" else None)
        if found is None or not found[0]:
            continue
        terms, bias = found
        negated = [(source, -weight) for source, weight in terms]
        replacements[node.name] = [*_gate(f"{node.name}/negated", negated, -bias, slice(None), constants),
                                   Node(node.name, "Sigmoid", [f"{node.name}/negated:0"], FLOAT)]
        notes.append(f"{node.name}: 1 - sigmoid(g) as sigmoid(-g), the Dense of g negated")
    return replacements, constants, notes
