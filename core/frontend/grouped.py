"""Grouped convolutions as the layers every target has: a Conv2D whose filter holds fewer input channels than its input
(Keras 3's `groups`, PyTorch's and ONNX's through their converters) is a depthwise convolution where each group is one
channel, else the Conv2D of its block-diagonal filter; the .tflite reader expands a grouped CONV_2D's filter alike."""

from __future__ import annotations

import numpy as np

from core.frontend.graph import Graph, GraphError, Node
from core.frontend.rewrite import const_node, constant_of


def grouped_as_depthwise(graph: Graph, by_name: dict[str, Node]):
    """Output channel o of a convolution of C groups reads input channel o // (O / C), as a depthwise one of multiplier
    O / C does: the filter [kh, kw, 1, O] is the depthwise [kh, kw, C, O / C] in the same order. A convolution of fewer
    groups (several input channels each: ResNeXt's, RegNet's) is the Conv2D of its block-diagonal filter [kh, kw, C, O]:
    output channel o reads its group's channels with the group's taps and every other channel with 0, so its sums, and
    every rounding after them, are the grouped convolution's (the weight G times larger)."""
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        if node.op != "Conv2D" or len(node.inputs) != 2:
            continue
        shape, weights = graph.shape(node.inputs[0]), constant_of(graph, by_name, node.inputs[1])
        if shape is None or weights is None or weights.ndim != 4 or shape[3] in (None, weights.shape[2]):
            continue
        channels, outputs = shape[3], weights.shape[3]
        groups = channels // max(weights.shape[2], 1)
        if channels % max(weights.shape[2], 1) or outputs % groups:
            raise GraphError(f"{node.name}: a Conv2D of a filter of {list(weights.shape)} on {channels} channels: its "
                             f"{weights.shape[2]} input channels a group do not divide {channels}, or its {outputs} outputs "
                             f"the {groups} groups (TensorFlow refuses it too)")
        attrs = {key: value for key, value in node.attrs.items() if key in ("T", "strides", "padding", "dilations", "data_format", "explicit_paddings")}
        if weights.shape[2] == 1:
            constants[name := f"{node.name}/depthwise_filter"] = weights.reshape(*weights.shape[:2], channels, outputs // channels)
            replacements[node.name] = [const_node(name, constants[name]), Node(node.name, "DepthwiseConv2dNative", [node.inputs[0], name], attrs)]
            notes.append(f"{node.name}: Conv2D of {channels} groups -> DepthwiseConv2dNative of multiplier {outputs // channels}")
            continue
        constants[name := f"{node.name}/block_diagonal_filter"] = grouped_filter_as_dense(weights, groups, axis=2)
        replacements[node.name] = [const_node(name, constants[name]), Node(node.name, "Conv2D", [node.inputs[0], name], dict(node.attrs))]
        notes.append(f"{node.name}: Conv2D of {groups} groups -> Conv2D of the block-diagonal filter {list(constants[name].shape)}")
    return replacements, constants, notes


def grouped_filter_as_dense(weights: np.ndarray, groups: int, axis: int) -> np.ndarray:
    """A grouped convolution's filter, its input channels a group along `axis` (TensorFlow's HWIO: 2; TFLite's OHWI: 3)
    and its outputs along the other end, as the dense filter of all the input channels: output channel o of group
    g = o // (O / G) holds the group's taps at channels g x Cg .. (g + 1) x Cg - 1 and 0 elsewhere."""
    output_axis = 3 if axis != 3 else 0
    per_group, outputs = weights.shape[axis], weights.shape[output_axis]
    dense_shape = list(weights.shape)
    dense_shape[axis] = per_group * groups
    dense = np.zeros(dense_shape, weights.dtype)
    for group in range(groups):
        index: list[slice] = [slice(None)] * 4
        index[axis] = slice(group * per_group, (group + 1) * per_group)
        index[output_axis] = slice(group * outputs // groups, (group + 1) * outputs // groups)
        dense[tuple(index)] = weights[tuple(slice(None) if k != output_axis else index[output_axis] for k in range(4))]
    return dense
