"""transpose in the graph: a Transpose by a constant permutation that keeps the batch axis first."""

from __future__ import annotations

import numpy as np

from core.frontend.graph import Graph, GraphError, Node
from core.frontend.layers import GraphIndex, Layer, Pattern


def image_permutation(node: Node, index: GraphIndex) -> tuple[int, ...]:
    """The permutation of one image's axes (the batch axis left out) of a Transpose; a GraphError where it is computed
    at run time or moves the batch axis."""
    if not index.is_const(node.inputs[1]):
        raise GraphError(f"{node.name}: Transpose by a permutation computed at run time; the IR permutes by a constant")
    permutation = [int(axis) for axis in np.asarray(index.const(node.inputs[1])).reshape(-1)]
    if not permutation or permutation[0] != 0:
        raise GraphError(f"{node.name}: Transpose by {permutation} moves the batch axis; the IR permutes each image's axes")
    return tuple(axis - 1 for axis in permutation[1:])


def match_transpose(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    """attrs: the permutation of one image's axes."""
    return Layer(name=node.name, op="transpose", inputs=[node.inputs[0]], output=f"{node.name}:0", nodes=[node.name],
                 attrs=image_permutation(node, index))


PATTERN = Pattern("transpose", ("Transpose",), match_transpose)
