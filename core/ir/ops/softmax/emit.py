"""A matched softmax layer as IR fields."""

from __future__ import annotations

from core.frontend.layers import Layer
from core.ir.op import IrContext
from core.ir.ops.softmax.record import MAX_CLASSES
from core.ir.records import IrError


def softmax_fields(layer: Layer, ctx: IrContext) -> dict:
    """shape: one image's; the softmax runs over its last axis. The output scale is the table's
    (a probability <= 1: log2scale >= 7 saturates only p > 127/128)."""
    shape = ctx.known_shape(layer, "shape", layer.inputs[0])
    if shape[-1] > MAX_CLASSES:
        raise IrError(f"layer {layer.ir_name}: softmax over {shape[-1]} values; the integer softmax sums at most {MAX_CLASSES}")
    return {"shape": shape, "input_log2scale": ctx.log2scale(layer.inputs[0]), "output_log2scale": ctx.log2scale(layer.output),
            "dtype": "int8", "beta": layer.attrs.beta}
