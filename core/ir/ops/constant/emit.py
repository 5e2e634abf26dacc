"""A matched constant layer as TF2IR fields and its values."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import Layer
from core.ir.op import IrContext
from core.quantize.grid import Pow2Grid


def constant_fields(layer: Layer, ctx: IrContext) -> dict:
    return {"input_shape": ctx.known_shape(layer, "input_shape", layer.inputs[0]),
            "output_shape": ctx.known_shape(layer, "output_shape", layer.output),
            "input_log2scale": ctx.log2scale(layer.inputs[0]), "output_log2scale": ctx.log2scale(layer.output)}


def constant_params(layer: Layer, ctx: IrContext) -> dict:
    """{"values": int8 [output_shape]}: the float values (of a batch of one, or none) on the output's grid, rounded as the
    annotated graph's FakeQuant rounds them."""
    values = ctx.weight(layer).astype(np.float32).reshape(ctx.known_shape(layer, "output_shape", layer.output))
    return {"values": Pow2Grid(ctx.log2scale(layer.output)).quantize(values)}
