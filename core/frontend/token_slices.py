"""A slice of tokens as a crop: a StridedSlice of tokens [N, L, C] along L alone (a ViT's class token, `x[:, 0]`, its
axis shrunk away; a run of tokens) as the crop along W of the image [N, 1, L, C] they are, Reshaped there and back, so the
IR's crop (a Cropping2D) takes it."""

from __future__ import annotations

import numpy as np

from core.frontend.graph import Graph, Node
from core.frontend.rewrite import const_node, constant_of

TOKENS = 1  # the axis of [N, L, C] sliced


def _bounds(graph: Graph, by_name: dict[str, Node], node: Node) -> tuple[int, int, int, int] | None:
    """(first, end, L, C) of the tokens a StridedSlice of [N, L, C] keeps, when it slices L alone by stride 1; None
    otherwise."""
    shape = graph.shape(node.inputs[0])
    found = [constant_of(graph, by_name, tensor) for tensor in node.inputs[1:4]]
    values = [value for value in found if value is not None and 1 <= value.size <= 3]
    if shape is None or len(shape) != 3 or min(shape[1:]) < 1 or len(values) != 3:
        return None
    given = values[0].size  # the axes past those given are taken whole (TensorFlow's `x[:, 0]`)
    begin, end, strides = (np.concatenate([np.asarray(value, np.int64).reshape(-1), np.full(3 - given, fill, np.int64)])
                           for value, fill in zip(values, (0, 0, 1)))
    masks = {key: int(node.attr(key, 0)) for key in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    whole = sum(1 << axis for axis in range(given, 3))
    masks["begin_mask"], masks["end_mask"] = masks["begin_mask"] | whole, masks["end_mask"] | whole
    if np.any(strides != 1) or masks["ellipsis_mask"] or masks["new_axis_mask"] or masks["shrink_axis_mask"] & ~(1 << TOKENS):
        return None
    for axis in (0, 2):  # the batch and the channels kept whole
        whole_begin = masks["begin_mask"] >> axis & 1 or begin[axis] == 0
        whole_end = masks["end_mask"] >> axis & 1 or (axis == 2 and end[axis] >= shape[2])
        if not (whole_begin and whole_end):
            return None
    length = shape[TOKENS]
    first = 0 if masks["begin_mask"] >> TOKENS & 1 else int(begin[TOKENS]) % length if -length <= begin[TOKENS] < length else None
    if first is None:
        return None
    if masks["shrink_axis_mask"] >> TOKENS & 1:
        return first, first + 1, length, shape[2]
    last = length if masks["end_mask"] >> TOKENS & 1 else min(int(end[TOKENS]) + (length if end[TOKENS] < 0 else 0), length)
    return (first, last, length, shape[2]) if last > first else None


def token_slices_as_crops(graph: Graph, by_name: dict[str, Node]):
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        found = _bounds(graph, by_name, node) if node.op == "StridedSlice" else None
        output = node.output_shapes[0] if found is not None and node.output_shapes else None
        if found is None or output is None:
            continue
        (first, end, length, channels), base = found, node.name
        values = {f"{base}/image_shape": np.asarray([-1, 1, length, channels], np.int32),
                  f"{base}/crop_begin": np.asarray([0, 0, first, 0], np.int32), f"{base}/crop_end": np.asarray([0, 0, end, 0], np.int32),
                  f"{base}/crop_strides": np.ones(4, np.int32), f"{base}/tokens_shape": np.asarray([-1, *output[1:]], np.int32)}
        constants.update(values)
        float32, reshaped = {"T": dict(node.attrs["T"])}, {"T": dict(node.attrs["T"]), "Tshape": {"type": "int32"}}
        sliced = {**float32, "Index": {"type": "int32"}, "begin_mask": {"i": 0b1011}, "end_mask": {"i": 0b1011},
                  "ellipsis_mask": {"i": 0}, "new_axis_mask": {"i": 0}, "shrink_axis_mask": {"i": 0}}
        replacements[node.name] = [
            *(const_node(name, value) for name, value in values.items()),
            Node(f"{base}/as_image", "Reshape", [node.inputs[0], f"{base}/image_shape"], dict(reshaped)),
            Node(f"{base}/crop", "StridedSlice", [f"{base}/as_image", f"{base}/crop_begin", f"{base}/crop_end", f"{base}/crop_strides"], sliced),
            Node(base, "Reshape", [f"{base}/crop", f"{base}/tokens_shape"], dict(reshaped))]
        notes.append(f"{node.name}: tokens {first}..{end - 1} of {length} -> a crop along W of the image [N, 1, {length}, {channels}]")
    return replacements, constants, notes
