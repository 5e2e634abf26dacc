"""crop in the graph: a StridedSlice of an NHWC tensor's height and width by constant begin and end, stride 1,
keeping the batch and the channels (Keras' Cropping2D); the amounts from the graph's static shapes."""

from __future__ import annotations

import numpy as np

from core.frontend.graph import Graph, GraphError, Node
from core.frontend.layers import GraphIndex, Layer, Pattern


def crop_amounts(graph: Graph, node: Node, index: GraphIndex) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) removed; a GraphError naming the node and what the IR takes otherwise."""
    if not all(index.is_const(tensor) for tensor in node.inputs[1:4]):
        raise GraphError(f"{node.name}: a StridedSlice by bounds computed at run time; the IR crops by constant amounts (Cropping2D)")
    strides = np.asarray(index.const(node.inputs[3])).reshape(-1)
    masks = [int(node.attr(key, 0)) for key in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask")]
    before, after = graph.shape(node.inputs[0]), graph.shape(f"{node.name}:0")
    if (len(strides) != 4 or np.any(strides != 1) or any(masks) or before is None or after is None or len(before) != 4
            or len(after) != 4 or before[3] != after[3] or min(after[1:]) < 1):
        raise GraphError(f"{node.name}: a StridedSlice other than a crop of height and width (strides {strides.tolist()}, shapes {before} "
                         f"-> {after}); the IR slices images only as Keras' Cropping2D does")
    begin = np.asarray(index.const(node.inputs[1])).reshape(-1)
    begin_mask = int(node.attr("begin_mask", 0))
    top, left = (0 if begin_mask >> axis & 1 else int(begin[axis]) % before[axis] for axis in (1, 2))
    return top, before[1] - top - after[1], left, before[2] - left - after[2]


def match_crop(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    """attrs: (top, bottom, left, right)."""
    return Layer(name=node.name, op="crop", inputs=[node.inputs[0]], output=f"{node.name}:0", nodes=[node.name],
                 attrs=crop_amounts(graph, node, index))


def slices_an_image(graph: Graph, node: Node, index: GraphIndex) -> bool:
    """A StridedSlice of a 4-D tensor (not of a shape vector, as a Conv2DTranspose's output size is computed)."""
    shape = graph.shape(node.inputs[0])
    return shape is not None and len(shape) == 4


PATTERN = Pattern("crop", ("StridedSlice",), match_crop, applies=slices_an_image)
