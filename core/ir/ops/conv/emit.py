"""A matched conv/dwconv layer as IR fields and int8 constants, under the calibration table.
Every rounding decision is written down in the docstrings of `conv_fields` and
`conv_params` (and core/ir/fixedpoint.fake_quant_ints)."""

from __future__ import annotations

import dataclasses

import numpy as np

from core.frontend.grouped import grouped_filter_as_dense
from core.frontend.layers import Layer
from core.ir.activations import activation_named
from core.ir.op import IrContext
from core.ir.records import IrError
from core.quantize.integers import fake_quant_ints
from core.quantize.calibration.methods import clipping_is_deliberate
from core.quantize.table import corrected


def same_padding(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int, int]:
    """(output size, before, after) of TensorFlow's SAME padding along one axis:
    out = ceil(in / stride), total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - in, 0),
    before = total // 2 (the smaller half), after = total - before."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return out, total // 2, total - total // 2


def _padding(layer: Layer, in_shape: list[int]) -> tuple[int, int, int, int]:
    attrs = layer.attrs
    (kh, kw), (sh, sw), (dh, dw) = attrs.kernel, attrs.strides, attrs.dilations
    if attrs.explicit_padding is not None:
        top, bottom, left, right = (int(v) for v in attrs.explicit_padding)
        return top, bottom, left, right
    if attrs.padding == "SAME":
        _, top, bottom = same_padding(in_shape[1], kh, sh, dh)
        _, left, right = same_padding(in_shape[2], kw, sw, dw)
        return top, bottom, left, right
    if attrs.padding == "VALID":
        return 0, 0, 0, 0
    raise IrError(f"layer {layer.ir_name}: padding {attrs.padding!r} is not SAME, VALID or explicit")


def conv_geometry(layer: Layer, ctx: IrContext) -> dict:
    """input/output sizes, explicit padding, strides, dilations and kernel size, checked
    against the graph's shapes."""
    name, attrs = layer.ir_name, layer.attrs
    in_shape = ctx.nhwc(layer, "input_size", layer.inputs[0], flat=attrs.dense)
    out_shape = ctx.nhwc(layer, "output_size", layer.output, flat=attrs.dense)
    (kh, kw), (sh, sw), (dh, dw) = attrs.kernel, attrs.strides, attrs.dilations
    if min(sh, sw, dh, dw) < 1:
        raise IrError(f"layer {name}: stride {[sh, sw]} / dilations {[dh, dw]} must be >= 1")
    if max(dh, dw) > 1 and max(sh, sw) > 1:
        raise IrError(f"layer {name}: dilations {{height: {dh}, width: {dw}}} with stride {{height: {sh}, width: {sw}}}; "
                      f"seed 000 (4.2) requires stride 1 for a dilated (atrous) convolution")
    top, bottom, left, right = _padding(layer, in_shape)
    out_h = (in_shape[1] + top + bottom - (kh - 1) * dh - 1) // sh + 1
    out_w = (in_shape[2] + left + right - (kw - 1) * dw - 1) // sw + 1
    if [out_h, out_w] != out_shape[1:3]:
        raise IrError(f"layer {name}: output_size {out_shape[1:3]} disagrees with the convolution geometry "
                      f"(input {in_shape[1:3]}, padding {[top, bottom, left, right]}, kernel {[kh, kw]}, stride {[sh, sw]}, "
                      f"dilations {[dh, dw]} give {[out_h, out_w]})")
    return {
        "in": in_shape,
        "out": out_shape,
        "padding": {"top": top, "bottom": bottom, "left": left, "right": right},
        "stride": {"height": int(sh), "width": int(sw)},
        "dilations": {"height": int(dh), "width": int(dw)},
        "kernel_size": {"height": int(kh), "width": int(kw)},
    }


def as_hwio(layer: Layer, weight: np.ndarray) -> np.ndarray:
    """A dense layer's [K, C] weight is the 1x1 conv's [1, 1, K, C]; a depthwise weight [H, W, C, M] held as a conv
    (`block_diagonal`) is the conv's block-diagonal [H, W, C, C x M]."""
    if layer.attrs.dense and weight.ndim == 2:
        return weight.reshape(1, 1, *weight.shape)
    return block_diagonal(weight) if layer.attrs.block_diagonal else weight


def block_diagonal(depthwise: np.ndarray) -> np.ndarray:
    """A depthwise weight [H, W, C, M] as the conv weight [H, W, C, C x M] that computes the same sums: output channel
    c x M + m (TensorFlow's order) reads input channel c alone, with the depthwise taps; every other tap is 0, so the
    integer sums, and so every rounding after them, are the depthwise layer's: a grouped convolution's of one channel a
    group."""
    height, width, channels, multiplier = depthwise.shape
    return grouped_filter_as_dense(depthwise.reshape(height, width, 1, channels * multiplier), channels, axis=2)


def depthwise_as_conv(layer: Layer, ctx: IrContext) -> Layer:
    """A dwconv layer as TF2IR holds it: itself at channel multiplier 1 (its record's HWC weight), else the conv of its
    block-diagonal weight (the same integers; the weight C times larger, its log2scale the same)."""
    if ctx.weight(layer).shape[3] == 1:
        return layer
    return dataclasses.replace(layer, op="conv", attrs=dataclasses.replace(layer.attrs, block_diagonal=True))


def checked_weight(layer: Layer, ctx: IrContext) -> np.ndarray:
    weight = as_hwio(layer, ctx.weight(layer))
    if weight.ndim != 4:
        raise IrError(f"layer {layer.ir_name}: weight {layer.weight} of shape {list(weight.shape)}; expected [H, W, Cin, Cout/multiplier]")
    if layer.op == "dwconv" and weight.shape[3] != 1:
        raise IrError(f"layer {layer.ir_name}: weight: depthwise channel multiplier {weight.shape[3]}; the IR's dwconv weight is HWC "
                      f"(multiplier 1)")
    return weight


def conv_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000, 4.2 CONV/DWCONV: every key but name, operation, previous_layer, next_layer.

    - activation_type: an IR activation (core/ir/activations.py), else an IrError.
    - *_log2scale: real = int * 2^-log2scale. input from the layer's input tensor, weight and
      bias from their constants, output from the layer's output (after the activation).
    - output_shift = input_log2scale + weight_log2scale - output_log2scale (a right shift of
      the int32 accumulator, rounded half up), in the target's shift range (IrOp.describe).
    - bias_shift = input_log2scale + weight_log2scale - bias_log2scale (a left shift of the
      int8 bias into the accumulator's scale), in the target's shift range.
    - load_bias: false for a conv without a bias; then bias_log2scale = 0 and bias_shift = 0
      (placeholders, not used) and there is no bias tensor.
    - padding: explicit {top, bottom, left, right} zeros (int8 0 = real 0). SAME: TensorFlow's
      rule, total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - in, 0),
      top = total // 2, bottom = total - top (left/right alike); VALID: zeros; a folded Pad:
      its values; an atrous SpaceToBatchND/BatchToSpaceND block: paddings - crops.
    - dilations: the block shape of an atrous block, or Conv2D's dilations; a dilation > 1
      needs stride 1 (seed 000), else IrError.
    - dwconv: channel multiplier 1 (the IR's dwconv weight is HWC); a depthwise layer of multiplier M > 1 is emitted
      as the conv of its block-diagonal weight (`depthwise_as_conv`).
    - all dtypes "int8"; every number a Python int."""
    return {**conv_window_fields(layer, ctx), **conv_quantization_fields(layer, ctx)}


def conv_quantization_fields(layer: Layer, ctx: IrContext) -> dict:
    """The log2scales, shifts and dtypes of a layer with a weight and maybe a bias (conv_fields' docstring)."""
    input_log2scale = int(ctx.log2scale(layer.inputs[0]))
    weight_log2scale = int(ctx.log2scale(f"{layer.weight}:0"))
    output_log2scale = int(ctx.log2scale(layer.output))
    bias_log2scale = int(ctx.log2scale(f"{layer.bias}:0")) if layer.bias is not None else 0
    return {
        "input_log2scale": input_log2scale,
        "weight_log2scale": weight_log2scale,
        "bias_log2scale": bias_log2scale,
        "output_log2scale": output_log2scale,
        "output_shift": input_log2scale + weight_log2scale - output_log2scale,
        "bias_shift": input_log2scale + weight_log2scale - bias_log2scale if layer.bias is not None else 0,
        "input_dtype": "int8",
        "output_dtype": "int8",
        "weight_dtype": "int8",
        "bias_dtype": "int8",
    }


def conv_window_fields(layer: Layer, ctx: IrContext) -> dict:
    """The fields a conv shares with its float variant: activation, bias, channels and window
    (checked against the weight and the graph's shapes)."""
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
        "load_bias": layer.bias is not None,
        "input_channel_num": in_channels,
        "output_channel_num": out_channels,
        "input_size": {"height": geometry["in"][1], "width": geometry["in"][2]},
        "padding": geometry["padding"],
        "stride": geometry["stride"],
        "dilations": geometry["dilations"],
        "kernel_size": geometry["kernel_size"],
        "output_size": {"height": geometry["out"][1], "width": geometry["out"][2]},
    }


def conv_params(layer: Layer, ctx: IrContext) -> dict:
    """{"weight": int8, "bias": int8} in the IR's layouts: conv weight HWCiCo (TensorFlow's HWIO
    as is; a dense layer's [K, C] as [1, 1, K, C]), dwconv weight HWC (the multiplier axis, 1, squeezed), bias C. No "bias" without one.

    The integers are those of the annotated graph's FakeQuant (fake_quant_ints: w * 2^log2scale
    rounded half up, in TF's float32 arithmetic, saturated to [-128, 127]). A calibrated range
    (absmax) never saturates a weight or bias, so saturation there means the table does not fit
    the graph: IrError. A QAT graph's own range (table method "qat") may: the model was trained
    through that FakeQuant, which saturates, and the IR carries the same saturated integers
    (as the original tool did, evaluating the FakeQuant); so may calib.weight_method=mse, by
    choice. A bias with a correction (calib.bias_correction) is emitted corrected."""
    params = {}
    for kind, const in (("weight", layer.weight), ("bias", layer.bias)):
        if const is None:
            continue
        key = f"{const}:0"
        entry = ctx.table.entry(key)
        log2scale = int(ctx.log2scale(key))
        ints, saturated = fake_quant_ints(corrected(entry, ctx.graph.constants[const]), log2scale)
        if saturated and not clipping_is_deliberate(entry.method):  # qat's trained range, weight_method=mse
            raise IrError(f"layer {layer.ir_name}: {kind} {const} exceeds the int8 range of {kind}_log2scale {log2scale} "
                          f"(|{kind}| max {float(np.abs(ctx.graph.constants[const]).max())}); a calibrated {kind} is never "
                          f"saturated: the calibration table does not fit this graph")
        if kind == "weight":
            ints = as_hwio(layer, ints)
        if kind == "weight" and layer.op == "dwconv":
            if ints.shape[3] != 1:
                raise IrError(f"layer {layer.ir_name}: weight: depthwise channel multiplier {ints.shape[3]}; "
                              f"the IR's dwconv weight is HWC")
            ints = ints[:, :, :, 0]
        params[kind] = np.ascontiguousarray(ints.astype(np.int8))
    return params
