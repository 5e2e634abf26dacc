"""Function calls left in a frozen graph, inlined: Keras 3 computes a grouped convolution (keras-hub's MobileNetV3, any
Conv2D of groups > 1) as a jit-compiled tf.function, which freezing keeps as a StatefulPartitionedCall of a library
function. The call's body takes its place, its nodes named under the call's name; the graph's readers of the call's
outputs read the body's results. Everything else of the graph is left as it is."""

from __future__ import annotations

from core.frontend.graph import GraphError, tensor_index, tensor_node

CALLS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
MAX_NESTING = 8  # a call inside a called body is inlined on the next pass; deeper than this is refused


def inlined_calls(graph_def, origin: str):
    """`graph_def` (read from `origin`) with each call of a function of its library replaced by the function's body
    (nested calls too)."""
    for _ in range(MAX_NESTING):
        functions = {function.signature.name: function for function in graph_def.library.function}
        calls = {node.name for node in graph_def.node if node.op in CALLS and node.attr["f"].func.name in functions}
        if not calls:
            return graph_def
        graph_def = _inlined_once(graph_def, calls, functions, origin)
    raise GraphError(f"{origin}: function calls nested deeper than {MAX_NESTING}; expected a model's layers, not a program: "
                     "export the model as a SavedModel of its inference function")


def _inlined_once(graph_def, calls: set[str], functions: dict, origin: str):
    from tensorflow.core.framework import graph_pb2  # as the loaders do: TensorFlow is imported when a model is read
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph_def

    inlined = graph_pb2.GraphDef()
    inlined.versions.CopyFrom(graph_def.versions)
    inlined.library.CopyFrom(graph_def.library)
    results: dict[str, str] = {}  # "call:k" -> the body's tensor computing it
    for node in graph_def.node:
        if node.name not in calls:
            inlined.node.add().CopyFrom(node)
            continue
        function = functions[node.attr["f"].func.name]
        body, flat_names = function_def_to_graph_def(function)
        signature = function.signature
        arguments = [tensor for tensor in node.input if not tensor.startswith("^")]
        if len(arguments) != len(signature.input_arg):
            raise GraphError(f"{origin}: node {node.name} ({node.op}) passes {len(arguments)} inputs to {signature.name}, which takes "
                             f"{len(signature.input_arg)}: the file is damaged: export the model again")
        bound = {argument.name: tensor for argument, tensor in zip(signature.input_arg, arguments)}
        rename = _renamer(node.name, bound)
        for body_node in body.node:
            if body_node.name in bound:  # the argument's Placeholder: its readers read the call's input
                continue
            copied = inlined.node.add()
            copied.CopyFrom(body_node)
            copied.name = f"{node.name}/{body_node.name}"
            copied.input[:] = [rename(tensor) for tensor in body_node.input]
        for position, output in enumerate(signature.output_arg):
            results[f"{node.name}:{position}"] = rename(flat_names[function.ret[output.name]])
    for node in inlined.node:
        node.input[:] = [results.get(_indexed(tensor), tensor) for tensor in node.input]
    return inlined


def _renamer(call: str, bound: dict[str, str]):
    """A body's tensor name as the inlined graph names it: an argument's, the call's input; another, under the call."""
    def rename(tensor: str) -> str:
        control = "^" if tensor.startswith("^") else ""
        name = tensor.lstrip("^")
        node = tensor_node(name)
        if node in bound:
            return f"^{tensor_node(bound[node])}" if control else bound[node]
        return f"{control}{call}/{name}"
    return rename


def _indexed(tensor: str) -> str:
    """`tensor` as "node:k" (a bare node name is its output 0); a control input as it is."""
    return tensor if tensor.startswith("^") else f"{tensor_node(tensor)}:{tensor_index(tensor)}"
