"""A matched mul layer as IR fields."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import Layer
from core.ir.activations import activation_named
from core.ir.op import IrContext
from core.ir.records import IrError


def mul_fields(layer: Layer, ctx: IrContext) -> dict:
    """The inputs' and the output's shapes (one image's), scales and producers; output_shift =
    input0_log2scale + input1_log2scale - output_log2scale (right, rounded half up; negative:
    left), checked by IrOp.describe."""
    activation_named(layer.activation, f"layer {layer.ir_name}: ")
    shapes = [ctx.known_shape(layer, f"input{k}_shape", tensor) for k, tensor in enumerate(layer.inputs)]
    output = ctx.known_shape(layer, "output_shape", layer.output)
    try:
        broadcast = list(np.broadcast_shapes(*(tuple(shape) for shape in shapes)))
    except ValueError:
        broadcast = None
    if broadcast != output:
        raise IrError(f"layer {layer.ir_name}: inputs of shapes {shapes} do not broadcast to the output's {output}")
    scales = [ctx.log2scale(tensor) for tensor in layer.inputs]
    out = ctx.log2scale(layer.output)
    return {
        "activation_type": layer.activation,
        "input0_shape": shapes[0], "input1_shape": shapes[1], "output_shape": output,
        "input0_log2scale": scales[0], "input1_log2scale": scales[1], "output_log2scale": out,
        "output_shift": scales[0] + scales[1] - out,
        "input0_name": ctx.producer_name(layer.inputs[0]), "input1_name": ctx.producer_name(layer.inputs[1]),
        "dtype": "int8",
    }
