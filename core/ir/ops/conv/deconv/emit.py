"""A matched deconv layer as IR fields and int8 constants, under the calibration table."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import Layer
from core.ir.activations import activation_named
from core.ir.op import IrContext
from core.ir.ops.conv.emit import conv_params, conv_quantization_fields, same_padding
from core.ir.records import IrError


def _transposed_padding(size: int, out: int, kernel: int, stride: int, padding: str) -> tuple[int, int]:
    """TensorFlow's padding of a transposed convolution: the forward convolution's (SAME or VALID) from the output
    (`out`) back to the input (`size`)."""
    if padding == "VALID":
        return 0, max(0, (size - 1) * stride + kernel - out)
    _, before, after = same_padding(out, kernel, stride, 1)
    return before, after


def deconv_fields(layer: Layer, ctx: IrContext) -> dict:
    """conv's fields (conv/emit.py) for the transposed window: input_size the layer's input, output_size its output,
    padding TensorFlow's of the transposed convolution."""
    activation_named(layer.activation, f"layer {layer.ir_name}: ")
    attrs = layer.attrs
    in_shape, out_shape = ctx.nhwc(layer, "input_size", layer.inputs[0]), ctx.nhwc(layer, "output_size", layer.output)
    filter_shape = ctx.weight(layer).shape
    if filter_shape[2] != out_shape[3] or filter_shape[3] != in_shape[3]:
        raise IrError(f"layer {layer.ir_name}: filter of shape {list(filter_shape)} does not fit {in_shape[3]} input and {out_shape[3]} "
                      "output channels ([height, width, output, input])")
    (top, bottom), (left, right) = (_transposed_padding(in_shape[axis], out_shape[axis], attrs.kernel[axis - 1], attrs.strides[axis - 1],
                                                        attrs.padding) for axis in (1, 2))
    return {"activation_type": layer.activation, "load_bias": layer.bias is not None, "input_channel_num": in_shape[3],
            "output_channel_num": out_shape[3], "input_size": {"height": in_shape[1], "width": in_shape[2]},
            "padding": {"top": top, "bottom": bottom, "left": left, "right": right},
            "stride": {"height": attrs.strides[0], "width": attrs.strides[1]}, "dilations": {"height": 1, "width": 1},
            "kernel_size": {"height": attrs.kernel[0], "width": attrs.kernel[1]},
            "output_size": {"height": out_shape[1], "width": out_shape[2]}, **conv_quantization_fields(layer, ctx)}


def deconv_params(layer: Layer, ctx: IrContext) -> dict:
    """conv's int8 constants, the filter [height, width, output, input] flipped in height and width and its channels
    swapped: the equivalent conv's HWCiCo weight."""
    params = conv_params(layer, ctx)
    params["weight"] = np.ascontiguousarray(params["weight"][::-1, ::-1].transpose(0, 1, 3, 2))
    return params
