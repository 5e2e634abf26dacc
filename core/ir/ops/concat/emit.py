"""A matched concat2 / concat layer as IR fields."""

from __future__ import annotations

from core.frontend.layers import Layer
from core.ir.op import IrContext
from core.ir.ops.concat.record import DIM_AXES
from core.ir.records import IrError


def _size(shape: list[int]) -> dict[str, int]:
    return {"height": shape[0], "width": shape[1]}


def _geometry(layer: Layer, ctx: IrContext) -> tuple[list[list[int]], list[int]]:
    """Each input's and the output's HWC shape ([N, C] as [N, 1, 1, C]), checked to concatenate along dim."""
    shapes = [ctx.nhwc(layer, f"input{k} size", tensor, flat=True)[1:] for k, tensor in enumerate(layer.inputs)]
    out = ctx.nhwc(layer, "output_size", layer.output, flat=True)[1:]
    axis = DIM_AXES[layer.attrs.dim] - 1
    if (any(shape[k] != out[k] for shape in shapes for k in range(3) if k != axis)
            or out[axis] != sum(shape[axis] for shape in shapes)):
        raise IrError(f"layer {layer.ir_name}: input sizes {shapes} cannot be concatenated along {layer.attrs.dim} into {out}")
    return shapes, out


def _output(layer: Layer, ctx: IrContext, out: list[int]) -> dict:
    return {"dim": layer.attrs.dim, "output_channel_num": out[2], "output_size": _size(out),
            "output_log2scale": ctx.log2scale(layer.output)}


def concat_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000 ConcatV2 (concat2): two NHWC inputs joined along dim H, W or C. Each input's
    move to the output scale is a shift the target must encode (IrOp.describe)."""
    shapes, out = _geometry(layer, ctx)
    fields: dict = {**_output(layer, ctx, out), "output_dtype": "int8"}
    for number, (tensor, shape) in enumerate(zip(layer.inputs, shapes)):
        fields.update({
            f"input{number}_channel_num": shape[2],
            f"input{number}_size": _size(shape),
            f"input{number}_log2scale": ctx.log2scale(tensor),
            f"input{number}_dtype": "int8",
            f"input{number}_name": ctx.producer_name(tensor),
        })
    return fields


def concat_n_fields(layer: Layer, ctx: IrContext) -> dict:
    """concat of N > 2 inputs: concat2's fields, one list item per input."""
    shapes, out = _geometry(layer, ctx)
    return {**_output(layer, ctx, out), "dtype": "int8",
            "input_names": [ctx.producer_name(tensor) for tensor in layer.inputs],
            "input_channel_nums": [shape[2] for shape in shapes],
            "input_sizes": [_size(shape) for shape in shapes],
            "input_log2scales": [ctx.log2scale(tensor) for tensor in layer.inputs]}
