"""A matched pool layer as IR fields (seed 000 AVGPOOL/MAXPOOL)."""

from __future__ import annotations

from core.frontend.layers import Layer
from core.ir.op import IrContext
from core.ir.records import IrError

INT32_LIMIT = 2**31


def tf_padding(size: int, kernel: int, stride: int, padding: str) -> tuple[int, int, int]:
    """(output size, before, after) along one axis, as TensorFlow computes them: VALID pads
    nothing; SAME has out = ceil(in / stride), total = max((out - 1) * stride + kernel - in, 0),
    before = total // 2, after = total - before."""
    if padding == "VALID":
        return (size - kernel) // stride + 1, 0, 0
    if padding == "SAME":
        out = -(-size // stride)
        total = max((out - 1) * stride + kernel - size, 0)
        return out, total // 2, total - total // 2
    raise ValueError(f"padding {padding!r}")


def _pool_geometry(layer: Layer, ctx: IrContext) -> dict:
    in_shape, out_shape = ctx.graph.shape(layer.inputs[0]), ctx.graph.shape(layer.output)
    for what, shape in (("input_size", in_shape), ("output_size", out_shape)):
        if shape is None or len(shape) != 4 or min(shape[1:]) < 0:
            raise IrError(f"layer {layer.ir_name}: {what}: the IR needs an NHWC tensor of known size, got {shape}")
    attrs = layer.attrs
    (kh, kw), (sh, sw) = attrs.kernel, attrs.strides
    if attrs.padding == "EXPLICIT":
        top, bottom, left, right = attrs.explicit_padding
        out_h, out_w = (in_shape[1] + top + bottom - kh) // sh + 1, (in_shape[2] + left + right - kw) // sw + 1
    else:
        out_h, top, bottom = tf_padding(in_shape[1], kh, sh, attrs.padding)
        out_w, left, right = tf_padding(in_shape[2], kw, sw, attrs.padding)
    if [out_h, out_w] != [out_shape[1], out_shape[2]]:
        raise IrError(f"layer {layer.ir_name}: output_size {out_shape[1:3]} disagrees with the pooling geometry ({out_h}, {out_w})")
    if max(top, bottom) >= kh or max(left, right) >= kw:
        raise IrError(f"layer {layer.ir_name}: padding {[top, bottom, left, right]} leaves windows with no input element")
    return {
        "input_channel_num": int(in_shape[3]),
        "input_size": {"height": int(in_shape[1]), "width": int(in_shape[2])},
        "kernel_size": {"height": int(kh), "width": int(kw)},
        "stride": {"height": int(sh), "width": int(sw)},
        "padding": {"top": int(top), "bottom": int(bottom), "left": int(left), "right": int(right)},
        "output_channel_num": int(out_shape[3]),
        "output_size": {"height": int(out_h), "width": int(out_w)},
    }


def _pool_fields(layer: Layer, ctx: IrContext) -> dict:
    return {
        **_pool_geometry(layer, ctx),
        "input_log2scale": ctx.log2scale(layer.inputs[0]),
        "input_dtype": "int8",
        "output_log2scale": ctx.log2scale(layer.output),
        "output_dtype": "int8",
        "dtype": "int8",
    }


def avg_pool_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000 AVGPOOL. input_pre_ls = output_log2scale - input_log2scale: the IR only shifts
    left before averaging, so a negative value (an output scale coarser than the input's, which
    would lose precision before the average) is an IrError, as is one that could overflow the
    int32 window sum (and, in IrOp.describe, one the target cannot encode)."""
    fields = _pool_fields(layer, ctx)
    pre_ls = fields["output_log2scale"] - fields["input_log2scale"]
    if pre_ls < 0:
        raise IrError(
            f"layer {layer.ir_name}: input_pre_ls = {pre_ls} (output_log2scale {fields['output_log2scale']} < "
            f"input_log2scale {fields['input_log2scale']}); the IR's avg_pool only shifts its input left before "
            f"averaging; recalibrate so the output scale is at least as fine as the input's"
        )
    window = fields["kernel_size"]["height"] * fields["kernel_size"]["width"]
    if 128 * window * 2**pre_ls > INT32_LIMIT:
        raise IrError(f"layer {layer.ir_name}: input_pre_ls = {pre_ls} over a {window}-element window can overflow the int32 sum")
    fields["input_pre_ls"] = pre_ls
    return fields


def max_pool_fields(layer: Layer, ctx: IrContext) -> dict:
    """Like avg_pool's, without input_pre_ls: the max is taken at the input scale, then moved
    to output_log2scale (normally equal)."""
    return _pool_fields(layer, ctx)
