"""conv and dwconv in the graph: Conv2D / DepthwiseConv2dNative (+ BiasAdd) (+ an
activation), with an explicit Pad before it folded into the padding, and TF-slim's atrous
form SpaceToBatchND -> Conv2D/DepthwiseConv2dNative -> BatchToSpaceND folded into one
dilated layer (seed 000, 4.2: `dilations`, padding recovered from the paddings and crops).
A fully-connected layer (Keras Dense: MatMul (+ BiasAdd) (+ an activation) on [N, K]) is the
1x1 conv on the [1, 1, K] image: the same arithmetic, the same record."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.frontend.graph import Graph, GraphError, Node
from core.frontend.layers import GraphIndex, Layer, Pattern
from core.ir.activations import absorb_activation

BIAS_OPS = ("BiasAdd", "Add", "AddV2")
TF_OPS = {"conv": "Conv2D", "dwconv": "DepthwiseConv2dNative"}
LEADING_OPS = ("Pad", "SpaceToBatchND")  # folded into the conv they feed


@dataclass
class ConvAttrs:
    """What the graph says of a conv layer's window."""

    kernel: list[int]  # [height, width]
    strides: list[int]
    dilations: list[int]
    padding: str  # TensorFlow's: SAME, VALID or EXPLICIT
    explicit_padding: list[int] | None = None  # [top, bottom, left, right] when a Pad (or an atrous block) was folded in
    dense: bool = False  # a MatMul: input [N, K] read as [N, 1, 1, K], weight [K, N] as [1, 1, K, N]
    # a depthwise conv of weight [H, W, C, M] held as the conv of its block-diagonal weight [H, W, C, C x M] (emit.py)
    block_diagonal: bool = False


def match_conv(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    if node.op in LEADING_OPS:  # a Pad or an atrous block's SpaceToBatchND: the layer is its conv's
        layer = match_conv(graph, _leading_reader(node, index), index)
        if node.name not in layer.nodes:
            raise GraphError(f"{node.name}: this {node.op} before {layer.name} cannot be folded into the layer "
                             f"(a Pad needs a VALID or explicit-padding conv as its only reader, padding H and W only)")
        return layer
    if node.attr("data_format", "NHWC") != "NHWC":
        raise GraphError(f"{node.name}: {node.op} in {node.attr('data_format')} layout; the IR is NHWC only")
    data, weight = node.inputs[0], node.inputs[1]
    if not index.is_const(weight):
        raise GraphError(f"{node.name}: the weight of {node.op} is not a constant (run fold_check first)")
    layer = Layer(
        name=node.name,
        op="conv" if node.op == TF_OPS["conv"] else "dwconv",
        inputs=[data],
        output=f"{node.name}:0",
        nodes=[node.name],
        weight=index.producer(weight).name,
        attrs=_conv_attrs(node, index.const(weight).shape),
    )
    if index.producer(data).op == "SpaceToBatchND":
        _absorb_space_to_batch(layer, node, index)
    else:
        _absorb_explicit_pad(layer, index)
    _absorb_bias(layer, index)
    absorb_activation(layer, index)
    return layer


def match_dense(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    """MatMul(x [N, K], W [K, C]) as a 1x1 conv of the [1, 1, K] image."""
    data, weight = node.inputs[0], node.inputs[1]
    if node.attr("transpose_a", False) or node.attr("transpose_b", False):
        raise GraphError(f"{node.name}: MatMul with transpose_a/transpose_b; the IR's fully-connected layer is x [N, K] @ W [K, C] "
                         f"(transpose the weight in the model, as Keras Dense stores it)")
    shape = graph.shape(data)
    if not index.is_const(weight) or index.const(weight).ndim != 2 or shape is None or len(shape) != 2:
        raise GraphError(f"{node.name}: MatMul of {shape} by a {'non-' if not index.is_const(weight) else ''}constant weight; "
                         f"the IR's fully-connected layer multiplies an [N, K] activation by a constant [K, C] weight")
    layer = Layer(name=node.name, op="conv", inputs=[data], output=f"{node.name}:0", nodes=[node.name],
                  weight=index.producer(weight).name,
                  attrs=ConvAttrs(kernel=[1, 1], strides=[1, 1], dilations=[1, 1], padding="VALID", dense=True))
    _absorb_bias(layer, index)
    absorb_activation(layer, index)
    return layer


def _conv_attrs(node: Node, weight_shape) -> ConvAttrs:
    strides, dilations = node.attr("strides", [1, 1, 1, 1]), node.attr("dilations", [1, 1, 1, 1])
    attrs = ConvAttrs(kernel=[int(weight_shape[0]), int(weight_shape[1])], strides=[int(strides[1]), int(strides[2])],
                      dilations=[int(dilations[1]), int(dilations[2])], padding=node.attr("padding", "VALID"))
    if attrs.padding == "EXPLICIT":  # explicit_paddings: [[0, 0], [top, bottom], [left, right], [0, 0]] flattened
        attrs.explicit_padding = [int(v) for v in node.attr("explicit_paddings")[2:6]]
    return attrs


def _absorb_explicit_pad(layer: Layer, index: GraphIndex) -> None:
    pad = index.producer(layer.inputs[0])
    if pad.op != "Pad" or layer.attrs.padding not in ("VALID", "EXPLICIT") or index.sole_reader(layer.inputs[0]) is None:
        return
    if not index.is_const(pad.inputs[1]):
        return
    paddings = np.asarray(index.const(pad.inputs[1]))
    if paddings.shape != (4, 2) or paddings[0].any() or paddings[3].any():
        return  # pads the batch or channels: not a spatial padding
    own = layer.attrs.explicit_padding or [0, 0, 0, 0]
    layer.inputs = [pad.inputs[0]]
    layer.nodes.insert(0, pad.name)
    layer.attrs.explicit_padding = [int(paddings[1][0]) + own[0], int(paddings[1][1]) + own[1],
                                    int(paddings[2][0]) + own[2], int(paddings[2][1]) + own[3]]


def _leading_reader(node: Node, index: GraphIndex) -> Node:
    reader = index.sole_reader(f"{node.name}:0")
    if reader is None or reader.op not in TF_OPS.values():
        raise GraphError(f"{node.name}: a {node.op} that does not feed exactly one Conv2D/DepthwiseConv2dNative "
                         f"is not part of any IR layer")
    return reader


def feeds_conv(tf_op: str):
    """`applies` for a layer starting at a Pad or a SpaceToBatchND (they precede their conv in
    the graph's order): it belongs to the IR op whose conv is its only reader."""

    def applies(graph: Graph, node: Node, index: GraphIndex) -> bool:
        if node.op not in LEADING_OPS:
            return True
        reader = index.sole_reader(f"{node.name}:0")
        return reader is not None and reader.op == tf_op

    return applies


def _spatial_pairs(index: GraphIndex, tensor: str, what: str, node: Node) -> list[list[int]]:
    if not index.is_const(tensor):
        raise GraphError(f"{node.name}: its {what} {tensor} is not a constant (fold_check folds static shapes)")
    value = np.asarray(index.const(tensor))
    if value.shape != (2, 2):
        raise GraphError(f"{node.name}: {what} of shape {list(value.shape)}; an atrous conv2d has [[top, bottom], [left, right]]")
    return [[int(v) for v in row] for row in value]


def _block_shape(index: GraphIndex, node: Node) -> list[int] | None:
    return np.asarray(index.const(node.inputs[1])).reshape(-1).tolist() if index.is_const(node.inputs[1]) else None


def _absorb_space_to_batch(layer: Layer, conv: Node, index: GraphIndex) -> None:
    """SpaceToBatchND(block, paddings) -> conv(VALID, stride 1, dilation 1) -> BatchToSpaceND(block, crops)
    is the conv dilated by `block` over the input padded by `paddings`, with `crops` removed
    from the output's ends. The output's first crop rows are exactly the ones the first crop
    rows of top padding produce (likewise at the end), so the layer's explicit padding is
    paddings - crops (per side), and its dilations the block shape."""
    s2b = index.producer(layer.inputs[0])
    attrs = layer.attrs
    where = f"{conv.name}: atrous convolution (SpaceToBatchND {s2b.name})"
    if index.sole_reader(layer.inputs[0]) is None:
        raise GraphError(f"{where}: the SpaceToBatchND output is read by more than the conv")
    if attrs.padding != "VALID" or attrs.strides != [1, 1] or attrs.dilations != [1, 1]:
        raise GraphError(f"{where}: the conv between SpaceToBatchND and BatchToSpaceND has padding {attrs.padding}, "
                         f"strides {attrs.strides}, dilations {attrs.dilations}; expected VALID, 1, 1")
    b2s = index.sole_reader(layer.output)
    if b2s is None or b2s.op != "BatchToSpaceND":
        raise GraphError(f"{where}: the conv's output does not go (only) to a BatchToSpaceND")
    block, block_out = _block_shape(index, s2b), _block_shape(index, b2s)
    if block is None or len(block) != 2 or block != block_out:
        raise GraphError(f"{where}: block shapes {block} (SpaceToBatchND) and {block_out} (BatchToSpaceND {b2s.name}) "
                         f"must be equal constant [height, width]")
    paddings = _spatial_pairs(index, s2b.inputs[2], "paddings", s2b)
    crops = _spatial_pairs(index, b2s.inputs[2], "crops", b2s)
    (top, bottom), (left, right) = paddings
    explicit = [top - crops[0][0], bottom - crops[0][1], left - crops[1][0], right - crops[1][1]]
    if min(explicit) < 0:
        raise GraphError(f"{where}: crops {crops} exceed paddings {paddings}; the IR has no negative padding")
    layer.inputs = [s2b.inputs[0]]
    layer.nodes = [s2b.name, *layer.nodes, b2s.name]
    layer.output = f"{b2s.name}:0"
    attrs.dilations = [int(block[0]), int(block[1])]
    attrs.explicit_padding = explicit


def _absorb_bias(layer: Layer, index: GraphIndex) -> None:
    channels = np.asarray(index.const(f"{layer.weight}:0")).shape[-1]
    if layer.op == "dwconv":
        channels *= np.asarray(index.const(f"{layer.weight}:0")).shape[-2]
    absorb_bias(layer, index, channels)


def absorb_bias(layer: Layer, index: GraphIndex, channels: int) -> None:
    """The BiasAdd (or Add of a [channels] constant) that alone reads the layer's output joins it."""
    reader = index.sole_reader(layer.output)
    if reader is None or reader.op not in BIAS_OPS:
        return
    other = [tensor for tensor in reader.inputs if tensor.split(":")[0] != layer.output.split(":")[0]]
    # one value per output channel; a scalar (hard-swish's x + 3) is another layer's
    if len(other) != 1 or not index.is_const(other[0]) or np.shape(index.const(other[0])) != (channels,):
        return
    layer.bias = index.producer(other[0]).name
    layer.output = f"{reader.name}:0"
    layer.nodes.append(reader.name)


PATTERNS = {
    # a Pad or an atrous block's SpaceToBatchND starts the layer (named after its conv) of the IR op whose conv it feeds
    op: Pattern(op, (tf_op, *LEADING_OPS), match_conv, applies=feeds_conv(tf_op), leads=True) for op, tf_op in TF_OPS.items()
}
DENSE = Pattern("conv", ("MatMul",), match_dense)
