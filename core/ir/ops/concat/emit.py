"""A matched concat2 layer as IR fields."""

from __future__ import annotations

from core.frontend.layers import Layer
from core.ir.op import IrContext
from core.ir.ops.concat.record import DIM_AXES
from core.ir.records import IrError


def _size(shape: list[int]) -> dict[str, int]:
    return {"height": shape[0], "width": shape[1]}


def concat_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000 ConcatV2 (concat2): two NHWC inputs joined along dim H, W or C. Each input's
    move to the output scale is a shift the target must encode (IrOp.describe)."""
    dim = layer.attrs.dim
    fields: dict = {"dim": dim}
    shapes = []
    for number, tensor in enumerate(layer.inputs):
        shape = ctx.known_shape(layer, f"input{number}_size", tensor, rank=4)
        shapes.append(shape)
        fields.update({
            f"input{number}_channel_num": shape[2],
            f"input{number}_size": _size(shape),
            f"input{number}_log2scale": ctx.log2scale(tensor),
            f"input{number}_dtype": "int8",
        })
    out = ctx.known_shape(layer, "output_size", layer.output, rank=4)
    axis = DIM_AXES[dim] - 1
    if any(shapes[0][k] != shapes[1][k] for k in range(3) if k != axis) or out[axis] != shapes[0][axis] + shapes[1][axis]:
        raise IrError(f"layer {layer.ir_name}: input sizes {shapes} cannot be concatenated along {dim} into {out}")
    fields.update({"output_channel_num": out[2], "output_size": _size(out), "output_log2scale": ctx.log2scale(layer.output),
                   "output_dtype": "int8"})
    return fields
