"""A slice along one axis as a crop: a StridedSlice of a tensor [N, *before, L, *after] along L alone, by stride 1 (a
ViT's class token `x[:, 0]` of tokens [N, L, C], its axis shrunk away; PyTorch's packed attention projection, whose q,
k and v litert-torch SLICEs out of [N, 3, L, 1, C]; a run of tokens) as the crop along W of the image
[N, prod(before), L, prod(after)] holding the same bytes, Reshaped there and back, so the IR's crop (a Cropping2D) takes
it on every target."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.frontend.graph import Graph, Node
from core.frontend.rewrite import const_node, constant_of

MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


@dataclass(frozen=True)
class AxisSlice:
    """Elements first..end-1 of `axis` of a tensor of one sample's `shape` (the batch axis left out), the rest whole."""

    shape: tuple[int, ...]
    axis: int
    first: int
    end: int

    def image(self) -> tuple[int, int, int]:
        """(H, W, C) of the image whose W is the sliced axis."""
        return (int(np.prod(self.shape[:self.axis], dtype=np.int64)), self.shape[self.axis],
                int(np.prod(self.shape[self.axis + 1:], dtype=np.int64)))


def _axis_bounds(size: int, begin: int, end: int, masks: dict[str, int], axis: int) -> tuple[int, int] | None:
    """[first, end) of one axis of `size` a StridedSlice of stride 1 keeps; None where it keeps nothing."""
    if masks["shrink_axis_mask"] >> axis & 1:
        return (begin % size, begin % size + 1) if -size <= begin < size else None
    first = 0 if masks["begin_mask"] >> axis & 1 else min(begin + size if begin < 0 else begin, size)
    last = size if masks["end_mask"] >> axis & 1 else min(end + size if end < 0 else end, size)
    return (first, last) if last > first else None


def axis_slice(graph: Graph, by_name: dict[str, Node], node: Node) -> AxisSlice | None:
    """What a StridedSlice keeps where it slices one axis past the batch by stride 1 and keeps the batch whole; None
    otherwise (a slice of a shape vector, of several axes, by a stride or bounds computed at run time, or of an image's
    height or width keeping the axis, which is a crop already)."""
    shape = graph.shape(node.inputs[0])
    bounds_given = [constant_of(graph, by_name, tensor) for tensor in node.inputs[1:4]]
    found = [value for value in bounds_given if value is not None]
    if shape is None or len(shape) < 2 or min(shape[1:]) < 1 or len(found) != 3:
        return None
    rank, given = len(shape), found[0].size  # the axes past those given are taken whole (TensorFlow's `x[:, 0]`)
    if not 1 <= given <= rank or any(value.size != given for value in found):
        return None
    begin, end, strides = (np.concatenate([np.asarray(value, np.int64).reshape(-1), np.full(rank - given, fill, np.int64)])
                           for value, fill in zip(found, (0, 0, 1)))
    masks = {key: int(node.attr(key, 0)) for key in MASKS}
    whole = sum(1 << axis for axis in range(given, rank))
    masks["begin_mask"], masks["end_mask"] = masks["begin_mask"] | whole, masks["end_mask"] | whole
    batch_whole = (masks["begin_mask"] & 1 or begin[0] == 0) and masks["end_mask"] & 1 and not masks["shrink_axis_mask"] & 1
    if np.any(strides != 1) or masks["ellipsis_mask"] or masks["new_axis_mask"] or not batch_whole:
        return None
    bounds = [_axis_bounds(shape[axis], int(begin[axis]), int(end[axis]), masks, axis) for axis in range(1, rank)]
    sliced = [axis for axis, kept in enumerate(bounds, 1) if kept is None or kept != (0, shape[axis]) or masks["shrink_axis_mask"] >> axis & 1]
    kept = bounds[sliced[0] - 1] if len(sliced) == 1 else None
    if kept is None:
        return None
    first, last = kept
    if rank == 4 and sliced[0] in (1, 2) and not masks["shrink_axis_mask"]:
        return None  # a crop of an image's height or width: the IR's crop takes it as it is
    return AxisSlice(tuple(int(size) for size in shape[1:]), sliced[0] - 1, first, last)


def axis_slices_as_crops(graph: Graph, by_name: dict[str, Node]):
    """A canonical rewrite: each StridedSlice of one axis as Reshape -> crop along W -> Reshape."""
    replacements, constants, notes = {}, {}, []
    for node in graph.nodes:
        found = axis_slice(graph, by_name, node) if node.op == "StridedSlice" else None
        output = node.output_shapes[0] if found is not None and node.output_shapes else None
        if found is None or output is None:
            continue
        base, (height, width, channels) = node.name, found.image()
        values = {f"{base}/as_image/shape": np.asarray([-1, height, width, channels], np.int32),
                  f"{base}/crop_begin": np.asarray([0, 0, found.first, 0], np.int32),
                  f"{base}/crop_end": np.asarray([0, 0, found.end, 0], np.int32),
                  f"{base}/crop_strides": np.ones(4, np.int32), f"{base}/sliced_shape": np.asarray([-1, *output[1:]], np.int32)}
        constants.update(values)
        float32, reshaped = {"T": dict(node.attrs["T"])}, {"T": dict(node.attrs["T"]), "Tshape": {"type": "int32"}}
        sliced = {**float32, "Index": {"type": "int32"}, "begin_mask": {"i": 0b1011}, "end_mask": {"i": 0b1011},
                  "ellipsis_mask": {"i": 0}, "new_axis_mask": {"i": 0}, "shrink_axis_mask": {"i": 0}}
        replacements[node.name] = [
            *(const_node(name, value) for name, value in values.items()),
            Node(f"{base}/as_image", "Reshape", [node.inputs[0], f"{base}/as_image/shape"], dict(reshaped)),
            Node(f"{base}/crop", "StridedSlice", [f"{base}/as_image", f"{base}/crop_begin", f"{base}/crop_end", f"{base}/crop_strides"], sliced),
            Node(base, "Reshape", [f"{base}/crop", f"{base}/sliced_shape"], dict(reshaped))]
        notes.append(f"{node.name}: {found.first}..{found.end - 1} of axis {found.axis + 1} of {list(found.shape)} -> a crop along W "
                     f"of the image [N, {height}, {width}, {channels}]")
    return replacements, constants, notes
