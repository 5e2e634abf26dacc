"""A matched transpose layer as IR fields."""

from __future__ import annotations

from core.frontend.layers import Layer
from core.ir.op import IrContext


def transpose_fields(layer: Layer, ctx: IrContext) -> dict:
    return {"permutation": list(layer.attrs), "input_shape": ctx.known_shape(layer, "input_shape", layer.inputs[0]),
            "output_shape": ctx.known_shape(layer, "output_shape", layer.output), "log2scale": ctx.log2scale(layer.output)}
