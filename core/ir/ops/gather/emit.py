"""A matched gather layer as TF2IR fields and its table."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import Layer
from core.ir.op import IrContext
from core.quantize.grid import Pow2Grid


def gather_fields(layer: Layer, ctx: IrContext) -> dict:
    table = ctx.weight(layer)
    return {"vocabulary": int(table.shape[0]), "input_shape": ctx.known_shape(layer, "input_shape", layer.inputs[0]),
            "output_shape": ctx.known_shape(layer, "output_shape", layer.output), "output_log2scale": ctx.log2scale(layer.output)}


def gather_params(layer: Layer, ctx: IrContext) -> dict:
    """{"table": int8 [vocabulary, depth]}: the float table on the output's grid, rounded as the annotated graph's
    FakeQuant rounds each looked-up value."""
    table = ctx.weight(layer).astype(np.float32)
    return {"table": Pow2Grid(ctx.log2scale(layer.output)).quantize(table)}
