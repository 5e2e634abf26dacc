"""A matched reshape layer as IR fields."""

from __future__ import annotations

import math

import numpy as np

from core.frontend.graph import tensor_node
from core.frontend.layers import Layer
from core.ir.op import IrContext
from core.ir.records import IrError


def reshape_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000 RESHAPE. reshape_param: the graph's shape constant without its first (batch)
    element, as the original tool wrote it (SSD BoxPredictor_0/Reshape_1: [1, -1, 2] -> [-1, 2]);
    for a Squeeze (no shape constant) the output shape. input_shape / output_shape: without the
    batch dimension. log2scale: the scale the reshape shares with its input."""
    input_shape = ctx.known_shape(layer, "input_shape", layer.inputs[0])
    output_shape = ctx.known_shape(layer, "output_shape", layer.output)
    in_full, out_full = ctx.graph.shape(layer.inputs[0]) or [], ctx.graph.shape(layer.output) or []  # known_shape: both known
    if out_full[0] != in_full[0] or math.prod(input_shape) != math.prod(output_shape):
        raise IrError(f"layer {layer.ir_name}: output_shape {out_full} from input_shape {in_full}: the IR reshapes "
                      f"each image and keeps the batch dimension")
    node = ctx.graph.node(layer.name)
    shape_source = ctx.graph.node(tensor_node(node.inputs[1])) if node.op == "Reshape" and len(node.inputs) > 1 else None
    if shape_source is not None and shape_source.op == "Const":
        reshape_param = [int(v) for v in np.asarray(ctx.graph.constants[shape_source.name]).reshape(-1)[1:]]
    else:
        reshape_param = list(output_shape)
    return {
        "reshape_param": reshape_param,
        "input_shape": input_shape,
        "output_shape": output_shape,
        "dtype": "int8",
        "log2scale": ctx.log2scale(layer.output),
    }
