"""What the operations that add or remove rows and columns at an image's edges share: their fields (each passes the
key its record holds the amounts under)."""

from __future__ import annotations

from core.frontend.layers import Layer
from core.ir.op import IrContext


def edge_fields(layer: Layer, ctx: IrContext, key: str) -> dict:
    """The fields of a layer that adds or removes rows and columns at the image's edges: sizes,
    channels, `key` the (top, bottom, left, right) amounts its pattern matched (layer.attrs), the shared scale."""
    _, height, width, channels = ctx.nhwc(layer, "input_size", layer.inputs[0])
    _, out_height, out_width, _ = ctx.nhwc(layer, "output_size", layer.output)
    top, bottom, left, right = layer.attrs
    return {"input_size": {"height": height, "width": width}, "input_channel_num": channels,
            key: {"top": top, "bottom": bottom, "left": left, "right": right},
            "output_size": {"height": out_height, "width": out_width}, "output_channel_num": channels,
            "log2scale": ctx.log2scale(layer.output)}
