"""pad in the graph: a Pad (or a PadV2 by 0) of height and width that no conv absorbs as its padding (the conv
patterns come first and take a Pad feeding a VALID conv)."""

from __future__ import annotations

import numpy as np

from core.frontend.graph import Graph, GraphError, Node
from core.frontend.layers import GraphIndex, Layer, Pattern


def pad_amounts(node: Node, index: GraphIndex) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of a Pad of an NHWC tensor's H and W by zeros; a GraphError naming the node
    and what would work otherwise."""
    if not index.is_const(node.inputs[1]):
        raise GraphError(f"{node.name}: {node.op} by paddings computed at run time; the IR pads by constant amounts")
    paddings = np.asarray(index.const(node.inputs[1])).reshape(-1, 2)
    if node.op == "PadV2" and (not index.is_const(node.inputs[2]) or float(np.asarray(index.const(node.inputs[2]))) != 0.0):
        raise GraphError(f"{node.name}: PadV2 by a value other than 0; the IR pads with zeros (ZeroPadding2D)")
    if paddings.shape != (4, 2) or paddings[0].any() or paddings[3].any() or (paddings < 0).any():
        raise GraphError(f"{node.name}: {node.op} by {paddings.tolist()}; the IR pads height and width of an NHWC tensor "
                         "(ZeroPadding2D), not the batch or the channels")
    (top, bottom), (left, right) = paddings[1].tolist(), paddings[2].tolist()
    return int(top), int(bottom), int(left), int(right)


def match_pad(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    """attrs: (top, bottom, left, right)."""
    return Layer(name=node.name, op="pad", inputs=[node.inputs[0]], output=f"{node.name}:0", nodes=[node.name],
                 attrs=pad_amounts(node, index))


PATTERN = Pattern("pad", ("Pad", "PadV2"), match_pad)
