"""1-D signals as images of height 1: a network whose input is [N, L, C] (audio features, a waveform, embedded
text), or that Reshapes an image [N, H, W, C] to tokens [N, H x W, C] (a vision transformer's patches) or an
attention's heads [N, T, heads, H] back to tokens [N, T, heads x H], rewritten so that every such tensor is the
[N, 1, L, C] image holding the same values in the same order.

TensorFlow already computes Keras' 1-D layers that way: Conv1D, SeparableConv1D and the 1-D pools are an
ExpandDims to [N, 1, L, C], the 2-D op with a 1 x k window, and a Squeeze back. Held as images throughout, those
ExpandDims and Squeezes vanish and the 2-D ops are the IR's own conv, dwconv and pools, fused with the bias and the
activation that follow them. What reads a signal is rewritten on the image:

- a Dense on every time step (Keras 3's Tensordot, an attention's projection) as a 1x1 conv (dense_on_signals,
  before the lifting);
- element-wise ops (a bias, an activation, a FakeQuant, an Add of two signals) as they are, a constant of rank 3
  given the unit axis;
- a reduction (GlobalAveragePooling1D's Mean, GlobalMaxPooling1D's Max) over the time axis reduces H and W;
- Pad, ConcatV2 and a dilated Conv1D's SpaceToBatchND / BatchToSpaceND on the image's axes, a Reshape to a
  signal to [-1, 1, L', C'].

Anything else reads the signal back (a Squeeze of H), as does an end point that is a signal: its values and name
are the model's. So an op the IR cannot take on a signal (an LSTM's loop) is what the importer's refusal names, not
the Conv1D before it. The input placeholder becomes [N, 1, L, C]; `graph.as_input` feeds it the [N, L, C] samples
the model was given (row-major, the same values).
"""

from __future__ import annotations

import numpy as np

from core.frontend.embedding import is_ids_input
from core.frontend.graph import Graph, Node, canonical_tensor, tensor_node
from core.frontend.rewrite import const_node, constant_of, copy_node

# an axis of the signal [N, L, C] -> the axes of the image [N, 1, L, C] it spans (time is H and W: H has size 1)
IMAGE_AXES = {0: (0,), 1: (1, 2), 2: (3,)}
ELEMENTWISE = frozenset({
    "Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Sigmoid", "Tanh", "Softplus", "Softsign", "Neg", "Abs", "Square", "Sqrt", "StopGradient",
    "Rsqrt", "Exp", "Erf", "Erfc", "Pow", "Identity", "BiasAdd", "Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum",
    "SquaredDifference", "ClipByValue", "FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxVarsPerChannel", "FakeQuantWithMinMaxArgs",
})
REDUCTIONS = frozenset({"Mean", "Max", "Min", "Sum"})


class _NotASignal(Exception):
    """A node that does not read signals as images: it reads them back as signals."""


class _Lifting:
    """The walk over the graph: which original tensors are signals (now held as images) and which tensor holds
    each original tensor's value now."""

    def __init__(self, graph: Graph, by_name: dict[str, Node]):
        self.graph, self.by_name = graph, by_name
        self.signals: set[str] = set()
        self.moved: dict[str, str] = {}  # an original tensor -> the one holding its value now
        self.constants: dict[str, np.ndarray] = {}
        self.read_back: dict[str, str] = {}  # a signal -> the Squeeze giving it back as [N, L, C]
        self.end_points = {canonical_tensor(tensor) for tensor in graph.end_points}
        self.input_nodes = {tensor_node(tensor) for tensor in graph.input_tensors}

    def source(self, tensor: str) -> str:
        return self.moved.get(canonical_tensor(tensor), tensor)

    def is_signal(self, tensor: str) -> bool:
        return canonical_tensor(tensor) in self.signals

    def constant(self, tensor: str) -> np.ndarray | None:
        return constant_of(self.graph, self.by_name, tensor)

    def new_constant(self, name: str, value: np.ndarray) -> Node:
        self.constants[name] = value
        return const_node(name, value)

    def node(self, node: Node) -> list[Node]:
        """The nodes standing in `node`'s place."""
        replaced = self._lifted(node)
        output = f"{node.name}:0"
        if output in self.signals and output in self.end_points:  # the model's output keeps its name and shape
            image = replaced[-1]
            image.name = f"{node.name}/image"
            self.moved[output] = f"{image.name}:0"
            replaced.append(self._squeeze(node.name, image.name))
        return replaced

    def _lifted(self, node: Node) -> list[Node]:
        inputs = [self.source(tensor) for tensor in node.inputs]
        if node.name in self.input_nodes and len(node.output_shapes[0] or []) == 3 and not is_ids_input(node):
            return self._input(node)
        if node.op == "Squeeze" and self._squeezes_image_height(node):
            self.moved[f"{node.name}:0"] = inputs[0]
            self.signals.add(f"{node.name}:0")
            return []
        if self._tokens_of_image(node):
            return self._reshape(node, inputs)
        if not any(self.is_signal(tensor) for tensor in node.inputs):
            return [copy_node(node, inputs=inputs)]
        for rule in (self._expand_dims, self._elementwise, self._reduction, self._reshape, self._pad, self._concat, self._space_batch,
                     self._time_slice):
            try:
                replaced = rule(node, inputs)
            except _NotASignal:
                break
            if replaced is not None:
                return replaced
        return self._reading_signals(node, inputs)

    def _reading_signals(self, node: Node, inputs: list[str]) -> list[Node]:
        """`node` as it was, its signal inputs read back from the images."""
        added = []
        for position, tensor in enumerate(node.inputs):
            if not self.is_signal(tensor):
                continue
            key = canonical_tensor(tensor)
            if key not in self.read_back:
                squeeze = self._squeeze(f"{tensor_node(tensor)}/as_signal", inputs[position])
                self.read_back[key] = squeeze.name
                added.append(squeeze)
            inputs[position] = self.read_back[key]
        return [*added, copy_node(node, inputs=inputs)]

    @staticmethod
    def _squeeze(name: str, image: str) -> Node:
        return Node(name, "Squeeze", [image], {"T": {"type": "float32"}, "squeeze_dims": {"list_i": [1]}})

    def _input(self, node: Node) -> list[Node]:
        batch, length, channels = node.output_shapes[0]
        self.signals.add(f"{node.name}:0")
        return [copy_node(node, attrs={**node.attrs, "shape": {"shape": [batch, 1, length, channels]}})]

    def _tokens_of_image(self, node: Node) -> bool:
        """A Reshape of an image [N, H, W, C] to tokens [N, H x W, C] (a vision transformer's patches), or of an
        attention's heads [N, T, heads, H] to tokens [N, T, heads x H]: the image [N, 1, L, C] holds the same values in the
        same order, a signal from here on."""
        return ((is_tokens_of_image(self.graph, node) or is_heads_merged(self.graph, node) or is_step_of_sequence(self.graph, node))
                and self.constant(node.inputs[1]) is not None)

    def _squeezes_image_height(self, node: Node) -> bool:
        shape = self.graph.shape(node.inputs[0])
        dims = [int(dim) % 4 for dim in node.attr("squeeze_dims", [])] if shape is not None and len(shape) == 4 else []
        return dims == [1] and shape[1] == 1 and not self.is_signal(node.inputs[0])

    def _expand_dims(self, node: Node, inputs: list[str]) -> list[Node] | None:
        """Conv1D's and the 1-D pools' ExpandDims to [N, 1, L, C]: the image itself."""
        if node.op != "ExpandDims":
            return None
        dim = self.constant(node.inputs[1])
        if dim is None or dim.size != 1 or int(dim.reshape(-1)[0]) % 4 != 1 or not self.is_signal(node.inputs[0]):
            raise _NotASignal(node.name)
        self.moved[f"{node.name}:0"] = inputs[0]
        return []

    def _elementwise(self, node: Node, inputs: list[str]) -> list[Node] | None:
        if node.op not in ELEMENTWISE:
            return None
        new_inputs, new_constants = [], []
        for position, (tensor, source) in enumerate(zip(node.inputs, inputs)):
            value = None if self.is_signal(tensor) else self.constant(tensor)
            if not self.is_signal(tensor) and (value is None or value.ndim > 3):
                raise _NotASignal(node.name)
            if value is not None and value.ndim == 3:  # [., L, C] broadcast on the signal: the image's unit axis added
                new_constants.append(self.new_constant(f"{node.name}/operand_{position}_as_image", value[:, None]))
                source = new_constants[-1].name
            new_inputs.append(source)
        self.signals.add(f"{node.name}:0")
        return [*new_constants, copy_node(node, inputs=new_inputs)]

    def _reduction(self, node: Node, inputs: list[str]) -> list[Node] | None:
        if node.op not in REDUCTIONS:
            return None
        axes = self.constant(node.inputs[1])
        if axes is None or not self.is_signal(node.inputs[0]) or self.is_signal(node.inputs[1]):
            raise _NotASignal(node.name)
        signal_axes = sorted({int(axis) % 3 for axis in axes.reshape(-1)})
        keep_dims = bool(node.attr("keep_dims", False))
        if not keep_dims and 1 not in signal_axes:  # the result would keep H, the signal's would not
            raise _NotASignal(node.name)
        image_axes = np.asarray(sorted(axis for signal_axis in signal_axes for axis in IMAGE_AXES[signal_axis]), np.int32)
        if keep_dims:
            self.signals.add(f"{node.name}:0")
        axes_node = self.new_constant(f"{node.name}/image_axes", image_axes)
        return [axes_node, copy_node(node, inputs=[inputs[0], axes_node.name])]

    def _reshape(self, node: Node, inputs: list[str]) -> list[Node] | None:
        if node.op != "Reshape":
            return None
        shape = node.output_shapes[0] if node.output_shapes else None
        if shape is None or self.constant(node.inputs[1]) is None or any(dim < 0 for dim in shape[1:]):
            raise _NotASignal(node.name)
        if len(shape) != 3:  # a Flatten: the same bytes in the same order
            return [copy_node(node, inputs=inputs)]
        self.signals.add(f"{node.name}:0")
        shape_node = self.new_constant(f"{node.name}/image_shape", np.asarray([-1, 1, *shape[1:]], np.int32))
        return [shape_node, copy_node(node, inputs=[inputs[0], shape_node.name])]

    def _pad(self, node: Node, inputs: list[str]) -> list[Node] | None:
        if node.op not in ("Pad", "PadV2", "MirrorPad"):
            return None
        paddings = self.constant(node.inputs[1])
        if paddings is None or paddings.shape != (3, 2) or not self.is_signal(node.inputs[0]):
            raise _NotASignal(node.name)
        self.signals.add(f"{node.name}:0")
        image = np.insert(paddings, 1, 0, axis=0).astype(paddings.dtype)
        padding_node = self.new_constant(f"{node.name}/image_paddings", image)
        return [padding_node, copy_node(node, inputs=[inputs[0], padding_node.name, *inputs[2:]])]

    def _concat(self, node: Node, inputs: list[str]) -> list[Node] | None:
        if node.op != "ConcatV2":
            return None
        axis = self.constant(node.inputs[-1])
        if axis is None or not all(self.is_signal(tensor) for tensor in node.inputs[:-1]):
            raise _NotASignal(node.name)
        (image_axis,) = IMAGE_AXES[int(axis) % 3][-1:]
        self.signals.add(f"{node.name}:0")
        axis_node = self.new_constant(f"{node.name}/image_axis", np.asarray(image_axis, np.int32))
        return [axis_node, copy_node(node, inputs=[*inputs[:-1], axis_node.name])]

    def _time_slice(self, node: Node, inputs: list[str]) -> list[Node] | None:
        """A recurrent layer's time steps (core/frontend/recurrent.py): a StridedSlice of the signal along time alone,
        stride 1, as the same slice of the image's W (a crop)."""
        if node.op != "StridedSlice":
            return None
        begin, end, strides = (self.constant(tensor) for tensor in node.inputs[1:4])
        masks = [int(node.attr(key, 0)) for key in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")]
        if begin is None or end is None or strides is None or masks != [5, 5, 0, 0, 0] or np.any(strides != 1) or \
                not self.is_signal(node.inputs[0]):
            raise _NotASignal(node.name)
        self.signals.add(f"{node.name}:0")
        bounds = [self.new_constant(f"{node.name}/image_{part}", np.asarray(value, np.int32)) for part, value in
                  (("begin", [0, 0, int(begin[1]), 0]), ("end", [0, 1, int(end[1]), 0]), ("strides", [1, 1, 1, 1]))]
        return [*bounds, copy_node(node, inputs=[inputs[0], *(bound.name for bound in bounds)],
                                   attrs={**node.attrs, "begin_mask": {"i": 9}, "end_mask": {"i": 9}})]

    def _space_batch(self, node: Node, inputs: list[str]) -> list[Node] | None:
        """A dilated Conv1D's SpaceToBatchND / BatchToSpaceND along time: along W of the image, H left as it is."""
        if node.op not in ("SpaceToBatchND", "BatchToSpaceND"):
            return None
        block, margins = self.constant(node.inputs[1]), self.constant(node.inputs[2])
        if block is None or margins is None or block.shape != (1,) or margins.shape != (1, 2) or not self.is_signal(node.inputs[0]):
            raise _NotASignal(node.name)
        self.signals.add(f"{node.name}:0")
        block_node = self.new_constant(f"{node.name}/image_block_shape", np.concatenate([np.ones(1, block.dtype), block]))
        margins_node = self.new_constant(f"{node.name}/image_margins", np.concatenate([np.zeros((1, 2), margins.dtype), margins]))
        return [block_node, margins_node, copy_node(node, inputs=[inputs[0], block_node.name, margins_node.name])]


# graph.source's key: the [L, C] of a signal input the graph holds as the image [N, 1, L, C], or the [L] of token ids it holds
# as [N, 1, L]
SIGNAL_INPUT = "signal_input"


def held_signal(original: Graph, prepared: Graph) -> list[int] | None:
    """The [L, C] of `original`'s signal input [N, L, C] where `prepared` holds it as the image [N, 1, L, C] (the [L] of
    token ids [N, L] held as [N, 1, L]), else None."""
    if len(original.input_tensors) != 1:
        return None  # a model of several inputs is fed each input as its graph takes it (core/frontend/graph.py: as_input)
    before, after = original.shape(original.input_tensor), prepared.shape(prepared.input_tensor)
    if before is None or after is None or len(before) not in (2, 3) or list(after) != [before[0], 1, *before[1:]]:
        return None
    return [int(dim) for dim in before[1:]]


def _tokens_from_rank_4(graph: Graph, node: Node) -> tuple[list[int], list[int]] | None:
    """(the input's shape, the output's) where `node` Reshapes a rank-4 tensor of known size to tokens [N, L, C]."""
    if node.op != "Reshape":
        return None
    before, after = graph.shape(node.inputs[0]), node.output_shapes[0] if node.output_shapes else None
    if before is None or after is None or len(before) != 4 or len(after) != 3 or min(after[1:]) < 1 or min(before[1:]) < 1:
        return None
    return before, after


def is_tokens_of_image(graph: Graph, node: Node) -> bool:
    """`node` Reshapes a 4-D image to [N, L, C] tokens of the same channels (a vision transformer's patches)."""
    shapes = _tokens_from_rank_4(graph, node)
    return shapes is not None and shapes[1][2] == shapes[0][3] and shapes[1][1] == shapes[0][1] * shapes[0][2]


def is_heads_merged(graph: Graph, node: Node) -> bool:
    """`node` Reshapes a multi-head attention's context [N, T, heads, H] to tokens [N, T, heads x H]."""
    shapes = _tokens_from_rank_4(graph, node)
    return shapes is not None and shapes[1][1] == shapes[0][1] and shapes[1][2] == shapes[0][2] * shapes[0][3]


def is_step_of_sequence(graph: Graph, node: Node) -> bool:
    """`node` Reshapes a recurrent layer's output at one step [N, U] to a sequence of one step [N, 1, U] (to be
    concatenated along time)."""
    if node.op != "Reshape":
        return False
    before, after = graph.shape(node.inputs[0]), node.output_shapes[0] if node.output_shapes else None
    return before is not None and after is not None and len(before) == 2 and len(after) == 3 and after[1] == 1 and after[2] == before[1] > 0


def signals_as_images(graph: Graph, by_name: dict[str, Node]):
    """The canonical rewrite (core/frontend/canonicalize.py) of a network whose input is a signal [N, L, C], or that
    Reshapes an image to tokens [N, L, C]."""
    input_nodes = [graph.node(tensor_node(tensor)) for tensor in graph.input_tensors]
    signals = [node for node in input_nodes if len(graph.shape(f"{node.name}:0") or []) == 3 and node.op == "Placeholder"
               and not is_ids_input(node)]
    signal_input = bool(signals)
    input_shape = graph.shape(f"{signals[0].name}:0") if signals else None
    tokens = [node.name for node in graph.nodes if is_tokens_of_image(graph, node)]
    if any(is_ids_input(node) for node in input_nodes):  # an Embedding's sequence (core/frontend/embedding.py): its Squeeze of the gathered image
        tokens += [node.name for node in graph.nodes if node.op == "Squeeze" and node.inputs and
                   by_name[tensor_node(node.inputs[0])].op == "GatherV2"]
    if not signal_input and not tokens:
        return {}, {}, []
    lifting = _Lifting(graph, by_name)
    replacements = {node.name: lifting.node(node) for node in graph.nodes}
    read_back = f"; read back as a signal by {len(lifting.read_back)} node(s)" if lifting.read_back else ""
    held = (f"{signals[0].name}:0: the signal {list(input_shape)} held as the image [{input_shape[0]}, 1, {input_shape[1]}, "
            f"{input_shape[2]}]" if signal_input else f"the tokens of {', '.join(tokens)} held as images of height 1")
    note = f"{held}: {len(lifting.moved)} ExpandDims/Squeeze around the 1-D layers' 2-D ops removed{read_back}"
    return replacements, lifting.constants, [note]


def _tensordot_source(graph: Graph, by_name: dict[str, Node], matmul: Node) -> str | None:
    """The [N, L, C] tensor that `matmul` multiplies by its constant [C, D] weight through Keras 3's Tensordot (a
    Transpose of the identity permutation, a Reshape to [N x L, C]), else None."""
    flattened = by_name.get(tensor_node(matmul.inputs[0]))
    if flattened is None or flattened.op != "Reshape" or matmul.attr("transpose_a", False) or matmul.attr("transpose_b", False):
        return None
    source, transpose = flattened.inputs[0], by_name.get(tensor_node(flattened.inputs[0]))
    if transpose is not None and transpose.op == "Transpose":
        permutation = graph.constants.get(tensor_node(transpose.inputs[1]))
        if permutation is None or list(np.asarray(permutation).reshape(-1)) != [0, 1, 2]:
            return None
        source = transpose.inputs[0]
    shape = graph.shape(source)
    return source if shape is not None and len(shape) == 3 else None


def _dense_on_every_step(graph: Graph, by_name: dict[str, Node], node: Node) -> tuple[str, np.ndarray] | None:
    """(the [N, L, C] tensor, the constant [C, D] weight) where `node` gives the Dense of every step of it: the last
    Reshape of Keras 3's Tensordot, or a BatchMatMulV2 by the weight (an EinsumDense's, a multi-head attention's
    projections)."""
    if node.op in ("BatchMatMulV2", "BatchMatMul") and not node.attr("adj_x", False) and not node.attr("adj_y", False):
        source, weight = node.inputs[0], constant_of(graph, by_name, node.inputs[1])
    else:
        matmul = by_name.get(tensor_node(node.inputs[0])) if node.op == "Reshape" else None
        weight = graph.constants.get(tensor_node(matmul.inputs[1])) if matmul is not None and matmul.op == "MatMul" else None
        source = _tensordot_source(graph, by_name, matmul) if weight is not None and np.ndim(weight) == 2 else None
    shape = graph.shape(source) if source is not None and weight is not None and np.ndim(weight) == 2 else None
    if shape is None or len(shape) != 3 or shape[2] != np.shape(weight)[0] or len(node.output_shapes[0] or []) != 3:
        return None
    return source, weight


def dense_on_signals(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite, before signals_as_images: a Dense on every time step of a signal (Keras 3's Tensordot:
    Transpose, Reshape to [N x L, C], MatMul, Reshape back; or a BatchMatMulV2 by a constant) as the Conv1D of kernel
    size 1 it is, an ExpandDims to [N, 1, L, C], a 1x1 Conv2D and a Squeeze, which the signal's lifting then holds as an
    image's 1x1 conv."""
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        found = _dense_on_every_step(graph, by_name, node)
        if found is None:
            continue
        source, weight = found
        dim, kernel = f"{node.name}/time_step_dim", f"{node.name}/time_step_kernel"
        constants[dim], constants[kernel] = np.asarray(1, np.int32), np.asarray(weight, np.float32)[None, None]
        float32 = {"T": {"type": "float32"}}
        replacements[node.name] = [
            const_node(dim, constants[dim]), const_node(kernel, constants[kernel]),
            Node(f"{node.name}/as_image", "ExpandDims", [source, dim], {**float32, "Tdim": {"type": "int32"}}),
            Node(f"{node.name}/conv", "Conv2D", [f"{node.name}/as_image", kernel],
                 {**float32, "strides": {"list_i": [1, 1, 1, 1]}, "padding": {"s": "VALID"}, "data_format": {"s": "NHWC"},
                  "dilations": {"list_i": [1, 1, 1, 1]}, "use_cudnn_on_gpu": {"b": True}}),
            Node(node.name, "Squeeze", [f"{node.name}/conv"], {**float32, "squeeze_dims": {"list_i": [1]}}),
        ]
        notes.append(f"{node.name}: a Dense on every time step (Tensordot) -> a 1x1 conv of the signal held as an image")
    return replacements, constants, notes
