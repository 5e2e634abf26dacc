"""A conv/dwconv layer kept in float (calib.keep_float) as float_conv/float_dwconv fields and
float32 constants: the conv's geometry and checks (core/ir/ops/conv/emit.py), the scales of its
input and output, and its weight and bias as the float graph holds them (no bias correction:
that corrects for quantized weights)."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import Layer
from core.ir.op import IrContext
from core.ir.ops.conv.emit import as_hwio, conv_window_fields


def float_conv_fields(layer: Layer, ctx: IrContext) -> dict:
    return {
        **conv_window_fields(layer, ctx),
        "input_log2scale": int(ctx.log2scale(layer.inputs[0])),
        "output_log2scale": int(ctx.log2scale(layer.output)),
        "input_dtype": "int8",
        "output_dtype": "int8",
        "weight_dtype": "float32",
        "bias_dtype": "float32",
    }


def float_conv_params(layer: Layer, ctx: IrContext) -> dict:
    """{"weight": float32, "bias": float32} in the conv's IR layouts (HWCiCo; dwconv HWC; bias C)."""
    weight = as_hwio(layer, ctx.weight(layer).astype(np.float32))
    if layer.op == "dwconv":
        weight = weight[:, :, :, 0]
    params = {"weight": np.ascontiguousarray(weight)}
    if layer.bias is not None:
        params["bias"] = np.ascontiguousarray(np.asarray(ctx.graph.constants[layer.bias], np.float32).reshape(-1))
    return params
