"""A matched add layer as IR fields. pl = op.inputs[0] (the augend), add = op.inputs[1] (the addend)."""

from __future__ import annotations

from core.frontend.layers import Layer
from core.ir.activations import activation_named
from core.ir.op import IrContext
from core.ir.records import IrError


def same_spatial_shape(ctx: IrContext, layer: Layer, tensors: list[str], field_name: str) -> list[int]:
    # a vector [N, C] (a recurrent layer's gate) is the image [N, 1, 1, C] of the same bytes, tokens [N, L, C] (a ViT's) [N, 1, L, C]
    shapes = [[shape[0], *[1] * (4 - len(shape)), *shape[1:]] if shape is not None and len(shape) in (2, 3) else shape
              for shape in map(ctx.graph.shape, tensors)]
    if any(shape is None or len(shape) != 4 or min(shape[1:]) < 0 for shape in shapes):
        raise IrError(f"layer {layer.ir_name}: {field_name}: the IR needs NHWC inputs of known size, got {shapes}")
    if any(shape[1:] != shapes[0][1:] for shape in shapes):
        raise IrError(f"layer {layer.ir_name}: {field_name}: inputs of different shapes {shapes}; the IR does not broadcast")
    return shapes[0]


def add_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000, 4.2 ADD. The shifts (the finer operand's alignment, output_shift_bit =
    output_log2scale - the coarser operand's log2scale) are checked by IrOp.describe."""
    activation_named(layer.activation, f"layer {layer.ir_name}: ")
    pl_tensor, add_tensor = layer.inputs
    shape = same_spatial_shape(ctx, layer, [pl_tensor, add_tensor, layer.output], "input_size")
    pl, add, out = ctx.log2scale(pl_tensor), ctx.log2scale(add_tensor), ctx.log2scale(layer.output)
    height, width, channels = (int(v) for v in shape[1:])
    return {
        "activation_type": layer.activation,
        "input_channel_num": channels,
        "input_size": {"height": height, "width": width},
        "size": channels * height * width,
        "dtype": "int8",
        "pl_log2scale": pl,
        "pl_shiftbit": pl,
        "add_log2scale": add,
        "add_shiftbit": add,
        "output_log2scale": out,
        "output_shift_bit": out - min(pl, add),
        "pl_name": ctx.producer_name(pl_tensor),
        "add_name": ctx.producer_name(add_tensor),
    }
