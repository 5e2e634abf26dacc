"""A conv/dwconv layer kept in float (calib.keep_float) as float_conv/float_dwconv fields and
float32 constants: the conv's geometry and checks (core/ir/ops/conv/emit.py), the scales of its
input and output, and its weight and bias as the float graph holds them (no bias correction:
that corrects for quantized weights)."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import Layer
from core.ir.activations import activation_named
from core.ir.op import IrContext
from core.ir.ops.conv.emit import as_hwio, checked_weight, conv_geometry
from core.ir.records import IrError


def float_conv_fields(layer: Layer, ctx: IrContext) -> dict:
    name = layer.ir_name
    activation_named(layer.activation, f"layer {name}: ")
    weight = checked_weight(layer, ctx)
    geometry = conv_geometry(layer, ctx)
    in_channels, out_channels = geometry["in"][3], geometry["out"][3]
    expected_out = in_channels * int(weight.shape[3]) if layer.op == "dwconv" else int(weight.shape[3])
    if int(weight.shape[2]) != in_channels or expected_out != out_channels:
        raise IrError(f"layer {name}: weight of shape {list(weight.shape)} does not fit {in_channels} input and "
                      f"{out_channels} output channels")
    return {
        "activation_type": layer.activation,
        "input_log2scale": int(ctx.log2scale(layer.inputs[0])),
        "output_log2scale": int(ctx.log2scale(layer.output)),
        "load_bias": layer.bias is not None,
        "input_channel_num": in_channels,
        "output_channel_num": out_channels,
        "input_size": {"height": geometry["in"][1], "width": geometry["in"][2]},
        "padding": geometry["padding"],
        "stride": geometry["stride"],
        "dilations": geometry["dilations"],
        "kernel_size": geometry["kernel_size"],
        "output_size": {"height": geometry["out"][1], "width": geometry["out"][2]},
        "input_dtype": "int8",
        "output_dtype": "int8",
        "weight_dtype": "float32",
        "bias_dtype": "float32",
    }


def float_conv_params(layer: Layer, ctx: IrContext) -> dict:
    """{"weight": float32, "bias": float32} in the conv's IR layouts (HWCiCo; dwconv HWC; bias C)."""
    weight = as_hwio(layer, np.asarray(ctx.graph.constants[layer.weight], np.float32))
    if layer.op == "dwconv":
        weight = weight[:, :, :, 0]
    params = {"weight": np.ascontiguousarray(weight)}
    if layer.bias is not None:
        params["bias"] = np.ascontiguousarray(np.asarray(ctx.graph.constants[layer.bias], np.float32).reshape(-1))
    return params
