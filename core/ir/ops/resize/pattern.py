"""resize_bilinear in the graph: ResizeBilinear."""

from __future__ import annotations

from dataclasses import dataclass

from core.frontend.graph import Graph, Node
from core.frontend.layers import GraphIndex, Layer, Pattern


@dataclass
class ResizeAttrs:
    align_corners: bool
    half_pixel_centers: bool


def match_resize(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    return Layer(name=node.name, op="resize_bilinear", inputs=[node.inputs[0]], output=f"{node.name}:0", nodes=[node.name],
                 attrs=ResizeAttrs(bool(node.attr("align_corners", False)), bool(node.attr("half_pixel_centers", False))))


PATTERN = Pattern("resize_bilinear", ("ResizeBilinear",), match_resize)
