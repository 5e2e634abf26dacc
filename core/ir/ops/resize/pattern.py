"""resize_bilinear and resize_nearest in the graph: ResizeBilinear, ResizeNearestNeighbor (Keras 3's
ExpandDims -> Tile form of nearest upsampling is rewritten into it by fold_check)."""

from __future__ import annotations

from dataclasses import dataclass

from core.frontend.graph import Graph, Node
from core.frontend.layers import GraphIndex, Layer, OutputRule, Pattern


@dataclass
class ResizeAttrs:
    align_corners: bool
    half_pixel_centers: bool


def match_resize(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    return Layer(name=node.name, op="resize_bilinear" if node.op == "ResizeBilinear" else "resize_nearest", inputs=[node.inputs[0]], output=f"{node.name}:0", nodes=[node.name],
                 attrs=ResizeAttrs(bool(node.attr("align_corners", False)), bool(node.attr("half_pixel_centers", False))),
                 output_rule=OutputRule.KEEPS_INPUT)


PATTERN = Pattern("resize_bilinear", ("ResizeBilinear",), match_resize)
NEAREST = Pattern("resize_nearest", ("ResizeNearestNeighbor",), match_resize)
