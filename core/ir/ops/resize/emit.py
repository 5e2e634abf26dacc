"""A matched resize_bilinear / resize_nearest layer as IR fields."""

from __future__ import annotations

from core.frontend.layers import Layer
from core.ir.op import IrContext
from core.ir.records import IrError


def resize_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000 ResizeBilinear. half_pixel_centers is written only when the graph sets it (true);
    absent means false, the original tool's (and TF1's) convention. The output shift is one the
    target must encode (IrOp.describe)."""
    align_corners, half_pixel = layer.attrs.align_corners, layer.attrs.half_pixel_centers
    if align_corners and half_pixel:
        raise IrError(f"layer {layer.ir_name}: align_corners and half_pixel_centers are both set (TF refuses this too)")
    in_shape = ctx.known_shape(layer, "input_size", layer.inputs[0], rank=4)
    out_shape = ctx.known_shape(layer, "output_size", layer.output, rank=4)
    fields = {
        "dtype": "int8",
        "align_corners": align_corners,
        "input_log2scale": ctx.log2scale(layer.inputs[0]),
        "output_log2scale": ctx.log2scale(layer.output),
        "input_channel_num": in_shape[2],
        "input_size": {"height": in_shape[0], "width": in_shape[1]},
        "output_size": {"height": out_shape[0], "width": out_shape[1]},
    }
    if half_pixel:
        fields["half_pixel_centers"] = True
    return fields


def resize_nearest_fields(layer: Layer, ctx: IrContext) -> dict:
    """resize_nearest: TensorFlow's flags as they are, one scale (the input's: a copy)."""
    in_shape = ctx.known_shape(layer, "input_size", layer.inputs[0], rank=4)
    out_shape = ctx.known_shape(layer, "output_size", layer.output, rank=4)
    return {
        "dtype": "int8",
        "align_corners": layer.attrs.align_corners,
        "half_pixel_centers": layer.attrs.half_pixel_centers,
        "log2scale": ctx.log2scale(layer.output),
        "input_channel_num": in_shape[2],
        "input_size": {"height": in_shape[0], "width": in_shape[1]},
        "output_size": {"height": out_shape[0], "width": out_shape[1]},
    }
