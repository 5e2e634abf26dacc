"""conv and dwconv: Conv2D / DepthwiseConv2dNative (+ BiasAdd) (+ Relu6), with an
explicit Pad before it folded into the padding, and TF-slim's atrous form
SpaceToBatchND -> Conv2D/DepthwiseConv2dNative -> BatchToSpaceND folded into one
dilated layer (seed 000, 4.2: `dilations`, padding recovered from the paddings and crops).

Here too: the layer's IR fields (`conv_ir_fields`), its int8 constants in the IR's
layouts (`conv_ir_params`) and the integer kernels the simulator runs
(`conv_kernel`, `dwconv_kernel`). Every rounding decision is written down in the
docstrings of `fake_quant_ints`, `conv_ir_fields` and `requantize`."""

from __future__ import annotations

import numpy as np

from core.frontend.graph import Graph, GraphError, Node
from core.ir.ops.registry import AnnotateRule, GraphIndex, IrContext, IrError, IrOp, Layer, QKind, register_op

BIAS_OPS = ("BiasAdd", "Add", "AddV2")
ACTIVATIONS = {"Relu6": "Relu6", "Relu": "Relu"}
IR_ACTIVATIONS = ("Relu6", "None")  # seed 000, 4.2: activation_type
CONV_OPS = {"conv": "Conv2D", "dwconv": "DepthwiseConv2dNative"}
LEADING_OPS = ("Pad", "SpaceToBatchND")  # folded into the conv they feed
INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# Exactness of the float32 arithmetic: every integer of magnitude <= 2^24 (times any power
# of two) is a float32, and |int8 x int8| <= 128 * 128 = 2^14 ((-128) x (-128)). A dot product
# of K int8 pairs, and every partial sum of it in whatever order the BLAS adds, is an integer
# of magnitude <= K * 2^14, so a float32 GEMM computes it exactly while K * 2^14 <= 2^24:
# K <= GEMM_MAX_K = 1024. Longer reductions are split into chunks of at most GEMM_MAX_K
# (exact_gemm), each exact, whose results are added in int32 (int64 where int32 could
# overflow). The kernels' float32 fast path (see _Requantize) uses the same bound with the
# bias and rounding offset counted in.
FLOAT32_EXACT_INT = 2**24
INT8_PRODUCT_MAX = 128 * 128
GEMM_MAX_K = FLOAT32_EXACT_INT // INT8_PRODUCT_MAX  # 1024
if GEMM_MAX_K * INT8_PRODUCT_MAX > FLOAT32_EXACT_INT:  # pragma: no cover  (the bound, stated as code)
    raise AssertionError("GEMM_MAX_K int8 products can exceed float32's exact integers")


# --- matching ----------------------------------------------------------------------------------


def match_conv(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    if node.op in LEADING_OPS:  # a Pad or an atrous block's SpaceToBatchND: the layer is its conv's
        layer = match_conv(graph, _leading_reader(node, index), index)
        if node.name not in layer.nodes:
            raise GraphError(f"{node.name}: this {node.op} before {layer.name} cannot be folded into the layer "
                             f"(a Pad needs a VALID or explicit-padding conv as its only reader, padding H and W only)")
        return layer
    if node.attr("data_format", "NHWC") != "NHWC":
        raise GraphError(f"{node.name}: {node.op} in {node.attr('data_format')} layout; the IR is NHWC only")
    data, weight = node.inputs[0], node.inputs[1]
    if not index.is_const(weight):
        raise GraphError(f"{node.name}: the weight of {node.op} is not a constant (run fold_check first)")
    layer = Layer(
        name=node.name,
        op="conv" if node.op == "Conv2D" else "dwconv",
        inputs=[data],
        output=f"{node.name}:0",
        nodes=[node.name],
        weight=index.producer(weight).name,
        attrs=_conv_attrs(node, index.const(weight).shape),
    )
    if index.producer(data).op == "SpaceToBatchND":
        _absorb_space_to_batch(layer, node, index)
    else:
        _absorb_explicit_pad(layer, index)
    _absorb_bias(layer, index)
    _absorb_activation(layer, index)
    return layer


def _conv_attrs(node: Node, weight_shape) -> dict:
    strides, dilations = node.attr("strides", [1, 1, 1, 1]), node.attr("dilations", [1, 1, 1, 1])
    attrs = {
        "kernel": [int(weight_shape[0]), int(weight_shape[1])],
        "strides": [int(strides[1]), int(strides[2])],
        "dilations": [int(dilations[1]), int(dilations[2])],
        "padding": node.attr("padding", "VALID"),
        "explicit_padding": None,  # [top, bottom, left, right] when a Pad (or an atrous block) was folded in
    }
    if attrs["padding"] == "EXPLICIT":  # explicit_paddings: [[0, 0], [top, bottom], [left, right], [0, 0]] flattened
        attrs["explicit_padding"] = [int(v) for v in node.attr("explicit_paddings")[2:6]]
    return attrs


def _absorb_explicit_pad(layer: Layer, index: GraphIndex) -> None:
    pad = index.producer(layer.inputs[0])
    if pad.op != "Pad" or layer.attrs["padding"] not in ("VALID", "EXPLICIT") or index.sole_reader(layer.inputs[0]) is None:
        return
    if not index.is_const(pad.inputs[1]):
        return
    paddings = np.asarray(index.const(pad.inputs[1]))
    if paddings.shape != (4, 2) or paddings[0].any() or paddings[3].any():
        return  # pads the batch or channels: not a spatial padding
    own = layer.attrs["explicit_padding"] or [0, 0, 0, 0]
    layer.inputs = [pad.inputs[0]]
    layer.nodes.insert(0, pad.name)
    layer.attrs["explicit_padding"] = [int(paddings[1][0]) + own[0], int(paddings[1][1]) + own[1],
                                       int(paddings[2][0]) + own[2], int(paddings[2][1]) + own[3]]


def _leading_reader(node: Node, index: GraphIndex) -> Node:
    reader = index.sole_reader(f"{node.name}:0")
    if reader is None or reader.op not in CONV_OPS.values():
        raise GraphError(f"{node.name}: a {node.op} that does not feed exactly one Conv2D/DepthwiseConv2dNative "
                         f"is not part of any IR layer")
    return reader


def feeds_conv(tf_op: str):
    """`applies` for a layer starting at a Pad or a SpaceToBatchND (they precede their conv in
    the graph's order): it belongs to the IR op whose conv is its only reader."""

    def applies(graph: Graph, node: Node, index: GraphIndex) -> bool:
        if node.op not in LEADING_OPS:
            return True
        reader = index.sole_reader(f"{node.name}:0")
        return reader is not None and reader.op == tf_op

    return applies


def _spatial_pairs(index: GraphIndex, tensor: str, what: str, node: Node) -> list[list[int]]:
    if not index.is_const(tensor):
        raise GraphError(f"{node.name}: its {what} {tensor} is not a constant (fold_check folds static shapes)")
    value = np.asarray(index.const(tensor))
    if value.shape != (2, 2):
        raise GraphError(f"{node.name}: {what} of shape {list(value.shape)}; an atrous conv2d has [[top, bottom], [left, right]]")
    return [[int(v) for v in row] for row in value]


def _absorb_space_to_batch(layer: Layer, conv: Node, index: GraphIndex) -> None:
    """SpaceToBatchND(block, paddings) -> conv(VALID, stride 1, dilation 1) -> BatchToSpaceND(block, crops)
    is the conv dilated by `block` over the input padded by `paddings`, with `crops` removed
    from the output's ends. The output's first crop rows are exactly the ones the first crop
    rows of top padding produce (likewise at the end), so the layer's explicit padding is
    paddings - crops (per side), and its dilations the block shape."""
    s2b = index.producer(layer.inputs[0])
    where = f"{conv.name}: atrous convolution (SpaceToBatchND {s2b.name})"
    if index.sole_reader(layer.inputs[0]) is None:
        raise GraphError(f"{where}: the SpaceToBatchND output is read by more than the conv")
    if layer.attrs["padding"] != "VALID" or layer.attrs["strides"] != [1, 1] or layer.attrs["dilations"] != [1, 1]:
        raise GraphError(f"{where}: the conv between SpaceToBatchND and BatchToSpaceND has padding {layer.attrs['padding']}, "
                         f"strides {layer.attrs['strides']}, dilations {layer.attrs['dilations']}; expected VALID, 1, 1")
    b2s = index.sole_reader(layer.output)
    if b2s is None or b2s.op != "BatchToSpaceND":
        raise GraphError(f"{where}: the conv's output does not go (only) to a BatchToSpaceND")
    block = np.asarray(index.const(s2b.inputs[1])).reshape(-1).tolist() if index.is_const(s2b.inputs[1]) else None
    block_out = np.asarray(index.const(b2s.inputs[1])).reshape(-1).tolist() if index.is_const(b2s.inputs[1]) else None
    if block is None or len(block) != 2 or block != block_out:
        raise GraphError(f"{where}: block shapes {block} (SpaceToBatchND) and {block_out} (BatchToSpaceND {b2s.name}) "
                         f"must be equal constant [height, width]")
    paddings = _spatial_pairs(index, s2b.inputs[2], "paddings", s2b)
    crops = _spatial_pairs(index, b2s.inputs[2], "crops", b2s)
    (top, bottom), (left, right) = paddings
    explicit = [top - crops[0][0], bottom - crops[0][1], left - crops[1][0], right - crops[1][1]]
    if min(explicit) < 0:
        raise GraphError(f"{where}: crops {crops} exceed paddings {paddings}; the IR has no negative padding")
    layer.inputs = [s2b.inputs[0]]
    layer.nodes = [s2b.name, *layer.nodes, b2s.name]
    layer.output = f"{b2s.name}:0"
    layer.attrs["dilations"] = [int(block[0]), int(block[1])]
    layer.attrs["explicit_padding"] = explicit
    layer.attrs["space_to_batch"] = {"block_shape": [int(b) for b in block], "paddings": paddings, "crops": crops}


def _absorb_bias(layer: Layer, index: GraphIndex) -> None:
    reader = index.sole_reader(layer.output)
    if reader is None or reader.op not in BIAS_OPS:
        return
    other = [tensor for tensor in reader.inputs if tensor.split(":")[0] != layer.output.split(":")[0]]
    if len(other) != 1 or not index.is_const(other[0]) or index.const(other[0]).ndim != 1:
        return
    layer.bias = index.producer(other[0]).name
    layer.output = f"{reader.name}:0"
    layer.nodes.append(reader.name)


def _absorb_activation(layer: Layer, index: GraphIndex) -> None:
    reader = index.sole_reader(layer.output)
    if reader is not None and reader.op in ACTIVATIONS:
        layer.activation = ACTIVATIONS[reader.op]
        layer.output = f"{reader.name}:0"
        layer.nodes.append(reader.name)


# --- IR fields ---------------------------------------------------------------------------------


def same_padding(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int, int]:
    """(output size, before, after) of TensorFlow's SAME padding along one axis:
    out = ceil(in / stride), total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - in, 0),
    before = total // 2 (the smaller half), after = total - before."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return out, total // 2, total - total // 2


def _known_nhwc(layer: Layer, ctx: IrContext, tensor: str, field_name: str) -> list[int]:
    shape = ctx.graph.shape(tensor)
    if shape is None or len(shape) != 4 or min(shape[1:]) < 0:
        raise IrError(f"layer {layer.ir_name}: {field_name}: the IR needs an NHWC tensor of known size, got {shape} for {tensor}")
    return [int(v) for v in shape]


def _geometry(layer: Layer, ctx: IrContext) -> dict:
    """input/output sizes, explicit padding, strides, dilations and kernel size, checked
    against the graph's shapes."""
    name = layer.ir_name
    in_shape = _known_nhwc(layer, ctx, layer.inputs[0], "input_size")
    out_shape = _known_nhwc(layer, ctx, layer.output, "output_size")
    (kh, kw), (sh, sw), (dh, dw) = layer.attrs["kernel"], layer.attrs["strides"], layer.attrs["dilations"]
    if min(sh, sw, dh, dw) < 1:
        raise IrError(f"layer {name}: stride {[sh, sw]} / dilations {[dh, dw]} must be >= 1")
    if max(dh, dw) > 1 and max(sh, sw) > 1:
        raise IrError(f"layer {name}: dilations {{height: {dh}, width: {dw}}} with stride {{height: {sh}, width: {sw}}}; "
                      f"seed 000 (4.2) requires stride 1 for a dilated (atrous) convolution")
    explicit = layer.attrs.get("explicit_padding")
    if explicit is not None:
        top, bottom, left, right = (int(v) for v in explicit)
    elif layer.attrs["padding"] == "SAME":
        _, top, bottom = same_padding(in_shape[1], kh, sh, dh)
        _, left, right = same_padding(in_shape[2], kw, sw, dw)
    elif layer.attrs["padding"] == "VALID":
        top = bottom = left = right = 0
    else:
        raise IrError(f"layer {name}: padding {layer.attrs['padding']!r} is not SAME, VALID or explicit")
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


def conv_ir_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000, 4.2 CONV/DWCONV: every key but name, operation, previous_layer, next_layer.

    - activation_type: "Relu6" or "None"; a Relu (or anything else) is an IrError: the IR has no Relu.
    - *_log2scale: real = int * 2^-log2scale. input from the layer's input tensor, weight and
      bias from their constants, output from the layer's output (after the activation).
    - output_shift = input_log2scale + weight_log2scale - output_log2scale (a right shift of
      the int32 accumulator, rounded half up; see requantize), in the target's shift range.
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
    - dwconv: channel multiplier 1 only (the IR's dwconv weight is HWC), else IrError.
    - all dtypes "int8"; every number a Python int."""
    name = layer.ir_name
    if layer.activation not in IR_ACTIVATIONS:
        raise IrError(f"layer {name}: activation_type {layer.activation!r} is not in the IR (one of "
                      f"{', '.join(IR_ACTIVATIONS)}; the IR has no Relu); train with Relu6 or no activation")
    weight = np.asarray(ctx.graph.constants[layer.weight])
    if weight.ndim != 4:
        raise IrError(f"layer {name}: weight {layer.weight} of shape {list(weight.shape)}; expected [H, W, Cin, Cout/multiplier]")
    if layer.op == "dwconv" and weight.shape[3] != 1:
        raise IrError(f"layer {name}: weight: depthwise channel multiplier {weight.shape[3]}; the IR's dwconv weight is HWC "
                      f"(multiplier 1)")
    geometry = _geometry(layer, ctx)
    in_channels, out_channels = geometry["in"][3], geometry["out"][3]
    expected_out = in_channels * int(weight.shape[3]) if layer.op == "dwconv" else int(weight.shape[3])
    if int(weight.shape[2]) != in_channels or expected_out != out_channels:
        raise IrError(f"layer {name}: weight of shape {list(weight.shape)} does not fit {in_channels} input and "
                      f"{out_channels} output channels")
    input_log2scale = int(ctx.log2scale(layer.inputs[0]))
    weight_log2scale = int(ctx.log2scale(f"{layer.weight}:0"))
    output_log2scale = int(ctx.log2scale(layer.output))
    output_shift = int(ctx.check_shift(layer, "output_shift", input_log2scale + weight_log2scale - output_log2scale))
    if layer.bias is not None:
        bias_log2scale = int(ctx.log2scale(f"{layer.bias}:0"))
        bias_shift = int(ctx.check_shift(layer, "bias_shift", input_log2scale + weight_log2scale - bias_log2scale))
    else:
        bias_log2scale = bias_shift = 0
    return {
        "activation_type": layer.activation,
        "input_log2scale": input_log2scale,
        "weight_log2scale": weight_log2scale,
        "bias_log2scale": bias_log2scale,
        "output_log2scale": output_log2scale,
        "output_shift": output_shift,
        "bias_shift": bias_shift,
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
        "weight_dtype": "int8",
        "bias_dtype": "int8",
    }


# --- int8 constants --------------------------------------------------------------------------------


def fake_quant_ints(values, log2scale: int, bits: int = 8) -> tuple[np.ndarray, bool]:
    """(the integers, whether any was saturated) that TensorFlow's FakeQuantWithMinMaxVars
    represents for `values` over the table's range [-2^(bits-1), 2^(bits-1) - 1] * 2^-log2scale.

    TF's kernel, in float32: clamped = min(max(x, min), max); q = floor((clamped - min) / scale + 0.5);
    the integer is q - 2^(bits-1). With a power-of-two scale the nudged range is the range and
    the division is exact, so the integer is x * 2^log2scale rounded half up (towards +inf) and
    saturated, except that `clamped - min` is itself rounded to float32: a value within float32
    rounding of a half-step rounds as TF rounds it. Emulating that step exactly makes these the
    annotated graph's integers, bit for bit. "Saturated": rounding alone would leave the int range."""
    x = np.asarray(values, dtype=np.float32)
    scale = np.float32(2.0**-log2scale)
    low = np.float32(-(2 ** (bits - 1))) * scale
    high = np.float32(2 ** (bits - 1) - 1) * scale
    unsaturated = np.floor(x.astype(np.float64) * 2.0**log2scale + 0.5)
    saturated = bool(x.size) and bool(unsaturated.min() < -(2 ** (bits - 1)) or unsaturated.max() > 2 ** (bits - 1) - 1)
    shifted = np.minimum(np.maximum(x, low), high) - low  # float32, as TF computes it
    steps = np.floor(shifted / scale + np.float32(0.5))
    return steps.astype(np.int64) - 2 ** (bits - 1), saturated


def conv_ir_params(layer: Layer, ctx: IrContext) -> dict:
    """{"weight": int8, "bias": int8} in the IR's layouts: conv weight HWCiCo (TensorFlow's HWIO
    as is), dwconv weight HWC (the multiplier axis, 1, squeezed), bias C. No "bias" without one.

    The integers are those of the annotated graph's FakeQuant (fake_quant_ints: w * 2^log2scale
    rounded half up, in TF's float32 arithmetic, saturated to [-128, 127]). A calibrated range
    (absmax) never saturates a weight or bias, so saturation there means the table does not fit
    the graph: IrError. A QAT graph's own range (table method "qat") may: the model was trained
    through that FakeQuant, which saturates, and the IR carries the same saturated integers
    (as the original tool did, evaluating the FakeQuant)."""
    params = {}
    for kind, const in (("weight", layer.weight), ("bias", layer.bias)):
        if const is None:
            continue
        key = f"{const}:0"
        log2scale = int(ctx.log2scale(key))
        ints, saturated = fake_quant_ints(ctx.graph.constants[const], log2scale)
        if saturated and ctx.table.entry(key).method != "qat":
            raise IrError(f"layer {layer.ir_name}: {kind} {const} exceeds the int8 range of {kind}_log2scale {log2scale} "
                          f"(|{kind}| max {float(np.abs(ctx.graph.constants[const]).max())}); a calibrated {kind} is never "
                          f"saturated: the calibration table does not fit this graph")
        if kind == "weight" and layer.op == "dwconv":
            if ints.shape[3] != 1:
                raise IrError(f"layer {layer.ir_name}: weight: depthwise channel multiplier {ints.shape[3]}; "
                              f"the IR's dwconv weight is HWC")
            ints = ints[:, :, :, 0]
        params[kind] = np.ascontiguousarray(ints.astype(np.int8))
    return params


# --- integer kernels -----------------------------------------------------------------------------


def relu6_limit(output_log2scale: int) -> int:
    """Relu6's upper clamp at the output scale: floor(6 * 2^output_log2scale + 1/2), exactly:
    6 * 2^output_log2scale for output_log2scale >= -1, its round half up below."""
    if output_log2scale >= 0:
        return 6 << output_log2scale
    return (6 + (1 << (-output_log2scale - 1))) >> -output_log2scale


# Where it is exact, the kernels accumulate and requantize in float32 (a GEMM with the
# weights pre-scaled by 2^-output_shift and the per-channel offset folded in, then clip and
# floor): the same integers as the int32 path, with fewer passes. False forces the int path.
FLOAT32_ACCUMULATION = True


class _Requantize:
    """How one call turns accumulators into int8 (the arithmetic of `requantize`), planned once.

    offset = (bias << bias_shift) + 2^(output_shift - 1) per output channel (the bias and the
    rounding constant, both added before the shift); [low, high] the Relu6/saturation clamp.
    bound >= |sum of products| + |offset| for every output, so: int32 accumulators when
    bound <= 2^31 - 1 (else int64, checked against int32: the hardware's accumulator), and the
    float32 path when bound <= 2^24 (every partial sum, scaled by a power of two, is exact)."""

    def __init__(self, fields: dict, bias, channels: int, reduction: int):
        self.shift = int(fields["output_shift"])
        if self.shift < 0:
            raise ValueError(f"output_shift {self.shift} < 0: the hardware only shifts the accumulator right")
        offset = np.zeros(channels, np.int64)
        if fields["load_bias"]:
            bias_shift = int(fields["bias_shift"])
            if bias_shift < 0:
                raise ValueError(f"bias_shift {bias_shift} < 0: the hardware only shifts the bias left")
            bias = np.asarray(bias)
            if bias.shape != (channels,) or not np.issubdtype(bias.dtype, np.integer):
                raise ValueError(f"bias of shape {list(bias.shape)} ({bias.dtype}) for {channels} output channels; "
                                 f"int8 C expected")
            if bias_shift > 40:
                raise ValueError(f"bias_shift {bias_shift}: beyond any int32 accumulator")
            offset += bias.astype(np.int64) << bias_shift
        if self.shift > 0:
            offset += 1 << (self.shift - 1)
        self.offset = offset
        bound = reduction * INT8_PRODUCT_MAX + int(np.abs(offset).max(initial=0))
        self.int_dtype = np.int32 if bound <= INT32_MAX else np.int64
        # (a shift beyond 100 would underflow 2^-shift in float32; the IR's shifts are <= 31)
        self.float32 = FLOAT32_ACCUMULATION and bound <= FLOAT32_EXACT_INT and self.shift <= 100
        self.scale = np.float32(2.0**-self.shift)
        if fields["activation_type"] == "Relu6":
            self.low, self.high = 0, min(relu6_limit(int(fields["output_log2scale"])), INT8_MAX)
        elif fields["activation_type"] == "None":
            self.low, self.high = INT8_MIN, INT8_MAX
        else:
            raise ValueError(f"activation_type {fields['activation_type']!r}; the IR has Relu6 and None")

    def scaled_offset(self) -> np.ndarray:
        """offset * 2^-output_shift as float32: exact, |offset| <= 2^24 on the float32 path."""
        return (self.offset.astype(np.float64) * 2.0**-self.shift).astype(np.float32)

    def finish_int(self, acc: np.ndarray, out: np.ndarray, offset: np.ndarray) -> None:
        """Integer accumulators (modified in place; last axis matching `offset`) -> out (int8)."""
        np.add(acc, offset.astype(acc.dtype), out=acc)
        if acc.dtype != np.int32 and acc.size and (acc.min() < INT32_MIN or acc.max() > INT32_MAX):
            raise OverflowError("the conv's accumulator (sum + bias << bias_shift + rounding) exceeds int32")
        if self.shift > 0:
            np.right_shift(acc, self.shift, out=acc)  # arithmetic: floor
        np.clip(acc, self.low, self.high, out=acc)
        np.copyto(out, acc, casting="unsafe")

    def finish_float(self, scaled: np.ndarray, out: np.ndarray) -> None:
        """(sum + offset) * 2^-output_shift, exact in float32 (modified in place) -> out (int8):
        floor is the arithmetic shift; clamping to the integers [low, high] before or after the
        floor is the same."""
        np.clip(scaled, self.low, self.high, out=scaled)
        np.floor(scaled, out=out, casting="unsafe")


def requantize(acc: np.ndarray, bias, fields: dict) -> np.ndarray:
    """The accumulator (int8 x int8 sums, [..., C]) -> int8 output, as the hardware does it:

    1. + bias << bias_shift per output channel (when load_bias): the bias at the accumulator's
       scale 2^-(input_log2scale + weight_log2scale), exact.
    2. >> output_shift with round half up: (acc + 2^(output_shift - 1)) >> output_shift, an
       arithmetic shift (floor for negatives), i.e. floor(acc * 2^-output_shift + 1/2): ties go
       towards +inf (2.5 -> 3, -2.5 -> -2), as TF's FakeQuant rounds. output_shift = 0: no rounding.
       The sum of step 1 and the rounding constant must fit the int32 accumulator (else OverflowError).
    3. Relu6 (activation_type "Relu6"): clamp to [0, relu6_limit(output_log2scale)] =
       [0, 6 * 2^output_log2scale] (output_log2scale >= -1). Clamping after rounding equals
       TF's Relu6 before its FakeQuant, as rounding is monotone.
    4. Saturate to [-128, 127] (TF's FakeQuant clamp); stored as int8.

    The kernels compute exactly this, in int32 or (where exact, see _Requantize) float32."""
    plan = _Requantize(fields, bias, acc.shape[-1], 0)
    work = np.array(acc, dtype=np.int64)
    out = np.empty(work.shape, np.int8)
    plan.finish_int(work, out, plan.offset)
    return out


# --- integer kernels: geometry ---------------------------------------------------------------------
#
# The padded input is held flattened to rows: image n, padded row y is row n * Hp' + y of a
# [N * Hp', Wp * C] array (Hp' = the padded height rounded up to a multiple of the stride,
# extra rows zero). Output row oh of image n is row r = n * Hq + oh (Hq = Hp' / stride) of the
# output, and reads input rows r * stride + i * dilation: for a block of output rows each kernel
# row i is one strided slice, so the work is vectorized over the batch. The Hq - OH rows
# between images are computed and dropped. Rows are processed in tiles of about TILE_BYTES
# (cache locality: large vectorized steps, never one image or pixel at a time), taps in a loop.

TILE_BYTES = 1 << 21


def _pads_strides(fields: dict) -> tuple[list[int], list[int], list[int], list[int]]:
    pad = fields["padding"]
    dilations = fields.get("dilations", {"height": 1, "width": 1})
    return ([int(pad["top"]), int(pad["bottom"]), int(pad["left"]), int(pad["right"])],
            [int(fields["stride"]["height"]), int(fields["stride"]["width"])],
            [int(dilations["height"]), int(dilations["width"])],
            [int(fields["kernel_size"]["height"]), int(fields["kernel_size"]["width"])])


class _Geometry:
    def __init__(self, shape, kernel, pads, strides, dilations):
        n, h, w, c = (int(v) for v in shape)
        (self.kh, self.kw), (self.sh, self.sw), (self.dh, self.dw) = kernel, strides, dilations
        if min(self.sh, self.sw, self.dh, self.dw, self.kh, self.kw) < 1 or min(pads) < 0:
            raise ValueError(f"kernel {kernel}, strides {strides}, dilations {dilations}, padding {pads}: invalid")
        self.n, self.h, self.w, self.c, self.pads = n, h, w, c, [int(p) for p in pads]
        hp, self.wp = h + pads[0] + pads[1], w + pads[2] + pads[3]
        self.out_h = (hp - (self.kh - 1) * self.dh - 1) // self.sh + 1
        self.out_w = (self.wp - (self.kw - 1) * self.dw - 1) // self.sw + 1
        if self.out_h < 1 or self.out_w < 1:
            raise ValueError(f"input {h}x{w} with padding {pads} is smaller than the kernel {kernel} dilated by {dilations}")
        self.hq = -(-hp // self.sh)  # output rows per image, valid or not
        self.rows = (n - 1) * self.hq + self.out_h if n else 0  # output rows computed (to the last valid one)

    def padded(self, x: np.ndarray, dtype, column_phases: bool = False) -> list[np.ndarray]:
        """The zero-padded input as `dtype`, flattened to rows [N * Hp', Wp * C]; with
        column_phases, one such array per column phase q (padded columns q, q + sw, ...)."""
        top, _, left, _ = self.pads
        rows = self.hq * self.sh
        phases = self.sw if column_phases else 1
        if rows == self.h and self.wp == self.w and phases == 1:
            return [x.astype(dtype, copy=False).reshape(self.n * self.h, self.w * self.c)]
        result = []
        for q in range(phases):  # padded column q + k * phases holds input column q + k * phases - left
            first = (q - left) % phases  # the first input column of this phase
            width = -(-(self.wp - q) // phases)
            phase = np.zeros((self.n, rows, width, self.c), dtype)
            if first < self.w:
                columns = x[:, :, first::phases, :]
                start = (first + left - q) // phases
                phase[:, top : top + self.h, start : start + columns.shape[2], :] = columns
            result.append(phase.reshape(self.n * rows, width * self.c))
        return result

    def input_rows(self, start: int, stop: int, i: int) -> slice:
        """The input rows kernel row i reads for output rows [start, stop)."""
        first = start * self.sh + i * self.dh
        return slice(first, first + (stop - start - 1) * self.sh + 1, self.sh)

    def tiles(self, row_bytes: int):
        """[start, stop) tiles of the output rows, about TILE_BYTES each at `row_bytes` per row."""
        step = max(1, TILE_BYTES // max(row_bytes, 1))
        for start in range(0, self.rows, step):
            yield start, min(start + step, self.rows)

    def valid(self, rows: np.ndarray) -> np.ndarray:
        """[rows, ...] computed output rows -> [N, OH, ...], dropping the rows between images."""
        tail = rows.shape[1:]
        if self.hq == self.out_h:
            return rows.reshape((self.n, self.out_h) + tail)
        full = np.empty((self.n * self.hq,) + tail, rows.dtype)
        full[: self.rows] = rows
        return np.ascontiguousarray(full.reshape((self.n, self.hq) + tail)[:, : self.out_h])


# --- integer kernels: conv -------------------------------------------------------------------------


def exact_gemm(cols: np.ndarray, weight: np.ndarray, dtype) -> np.ndarray:
    """cols [M, K] @ weight [K, Co] of int8 values (held as float32) -> the exact integer
    products in `dtype`: float32 GEMMs over chunks of at most GEMM_MAX_K reduction elements
    (each exact: |partial sums| <= GEMM_MAX_K * 2^14 <= 2^24), added in `dtype`."""
    reduction = cols.shape[1]
    acc = None
    for start in range(0, reduction, GEMM_MAX_K):
        stop = min(start + GEMM_MAX_K, reduction)
        if (stop - start) * INT8_PRODUCT_MAX > FLOAT32_EXACT_INT:  # pragma: no cover  (by construction)
            raise AssertionError(f"a float32 GEMM chunk of {stop - start} int8 products is not exact")
        part = np.matmul(cols[:, start:stop], weight[start:stop])
        if acc is None:
            acc = part.astype(dtype)
        else:
            np.add(acc, part, out=acc, casting="unsafe")  # exact integers: the cast is exact
    return acc


def _im2col_tiles(xp: np.ndarray, kernel_shape, geometry: _Geometry, ones_column: bool):
    """(start, stop, cols [(stop - start) * OW, K (+ 1)] float32) per tile of output rows:
    cols[., (i * KW + j) * C + ci] = the padded input `xp` ([N * Hp', Wp * C] int8)
    at tap (i, j), channel ci (HWCi order, as the HWCiCo weight flattens); with ones_column a
    last column of 1.0 (for a folded offset)."""
    kh, kw, c = kernel_shape
    reduction = kh * kw * c
    ow, sw, dw = geometry.out_w, geometry.sw, geometry.dw
    item = xp.itemsize
    buffer = None
    for start, stop in geometry.tiles(geometry.out_w * (reduction + 1) * 4):
        rows = stop - start
        if buffer is None:
            buffer = np.empty((rows, ow, reduction + ones_column), np.float32)
            if ones_column:
                buffer[:, :, reduction] = 1.0
        cols = buffer[:rows]
        for i in range(kh):
            source = xp[geometry.input_rows(start, stop, i)]
            if dw == 1:  # the kernel row's KW taps are KW * C consecutive elements
                window = np.lib.stride_tricks.as_strided(source, (rows, ow, kw * c), (source.strides[0], sw * c * item, item),
                                                         writeable=False)
                cols[:, :, i * kw * c : (i + 1) * kw * c] = window  # int8 -> float32, exact
                continue
            for j in range(kw):
                window = np.lib.stride_tricks.as_strided(source[:, j * dw * c :], (rows, ow, c),
                                                         (source.strides[0], sw * c * item, item), writeable=False)
                cols[:, :, (i * kw + j) * c : (i * kw + j + 1) * c] = window
        yield start, stop, cols.reshape(rows * ow, -1)


def conv_accumulator(x: np.ndarray, weight: np.ndarray, pads, strides, dilations, dtype=np.int32) -> np.ndarray:
    """The int8 convolution's accumulator, [N, OH, OW, Co] in `dtype`, exact: the sum over each
    window of x * w with zero padding. x int8 NHWC, weight int8 HWIO (HWCiCo). im2col tiles and
    exact_gemm (float32 GEMMs of at most GEMM_MAX_K products, added in `dtype`)."""
    geometry = _Geometry(x.shape, weight.shape[:2], pads, strides, dilations)
    if weight.shape[2] != x.shape[3]:
        raise ValueError(f"weight of shape {list(weight.shape)} for {x.shape[3]} input channels")
    co = weight.shape[3]
    wmat = weight.reshape(-1, co).astype(np.float32)
    rows = np.empty((geometry.rows, geometry.out_w, co), dtype)
    (xp,) = geometry.padded(np.ascontiguousarray(x), np.int8)
    for start, stop, cols in _im2col_tiles(xp, weight.shape[:3], geometry, False):
        rows[start:stop] = exact_gemm(cols, wmat, dtype).reshape(stop - start, geometry.out_w, co)
    return geometry.valid(rows)


def conv_kernel(fields: dict, params: dict, inputs: list) -> np.ndarray:
    """conv: int8 NHWC [N, H, W, Ci] -> int8 NHWC [N, OH, OW, Co], as the hardware computes it:
    the exact int32 sum of int8 input x int8 weight (HWCiCo) over each window, zero padding
    (padding/stride/dilations/kernel_size of `fields`), then requantize (bias << bias_shift,
    >> output_shift rounded half up, Relu6 clamp, saturation).

    im2col tiles and float32 GEMMs. Float32 path (when |sum| + |offset| <= 2^24): one GEMM with
    the weights times 2^-output_shift and the offset * 2^-output_shift as an extra row against
    a ones column, exact, then clip and floor. Otherwise exact_gemm (GEMM_MAX_K chunks) and
    the integer requantize."""
    x = _check_input(fields, inputs)
    pads, strides, dilations, kernel = _pads_strides(fields)
    weight = _int8_weight(params, 4, kernel, "conv")
    if weight.shape[2] != x.shape[3]:
        raise ValueError(f"conv weight of shape {list(weight.shape)} for {x.shape[3]} input channels")
    geometry = _Geometry(x.shape, kernel, pads, strides, dilations)
    _check_output(fields, geometry, weight.shape[3])
    co = weight.shape[3]
    reduction = int(np.prod(weight.shape[:3]))
    plan = _Requantize(fields, params.get("bias"), co, reduction)
    rows = np.empty((geometry.rows, geometry.out_w, co), np.int8)
    (xp,) = geometry.padded(x, np.int8)  # int8: the im2col copy casts
    if plan.float32:
        wmat = np.empty((reduction + 1, co), np.float32)
        wmat[:reduction] = weight.reshape(reduction, co).astype(np.float32) * plan.scale  # exact: a power of two
        wmat[reduction] = plan.scaled_offset()
        product = None
        for start, stop, cols in _im2col_tiles(xp, weight.shape[:3], geometry, True):
            if product is None:
                product = np.empty((cols.shape[0], co), np.float32)
            scaled = np.matmul(cols, wmat, out=product[: cols.shape[0]])
            plan.finish_float(scaled, rows[start:stop].reshape(-1, co))
    else:
        wmat = weight.reshape(reduction, co).astype(np.float32)
        for start, stop, cols in _im2col_tiles(xp, weight.shape[:3], geometry, False):
            plan.finish_int(exact_gemm(cols, wmat, plan.int_dtype), rows[start:stop].reshape(-1, co), plan.offset)
    return geometry.valid(rows)


# --- integer kernels: dwconv -----------------------------------------------------------------------


def _dwconv_tiles(phases: list, weight: np.ndarray, geometry: _Geometry, dtype, scale=None):
    """(start, stop, acc [stop - start, OW * C]) per tile of output rows: per tap,
    the tile's slice of the padded input's column phase (`phases`, from geometry.padded) x the
    tap's weights (tiled along OW, times `scale` when given) accumulated. float32 (scale
    given): exact while the sums stay within 2^24 (the caller's bound); int: the products in
    int16 (|int8 x int8| <= 2^14), accumulated in `dtype`."""
    kh, kw, c = weight.shape
    ow, sw, dw = geometry.out_w, geometry.sw, geometry.dw
    floating = scale is not None
    w = weight.astype(np.float32) * scale if floating else weight.astype(np.int16)
    tiled = np.tile(w, (1, 1, ow))  # [KH, KW, OW * C]
    product_dtype = np.float32 if floating else np.int16
    acc_buffer = product = None
    for start, stop in geometry.tiles(ow * c * 4):
        rows = stop - start
        if acc_buffer is None:
            acc_buffer, product = np.empty((rows, ow * c), dtype), np.empty((rows, ow * c), product_dtype)
        acc, prod = acc_buffer[:rows], product[:rows]
        for i in range(kh):
            for j in range(kw):
                phase, column = (j * dw) % sw, (j * dw) // sw * c
                tap = phases[phase][geometry.input_rows(start, stop, i), column : column + ow * c]
                if i == 0 and j == 0:
                    np.multiply(tap, tiled[i, j], out=acc, dtype=product_dtype, casting="unsafe")
                else:
                    np.multiply(tap, tiled[i, j], out=prod, dtype=product_dtype)
                    np.add(acc, prod, out=acc)
        yield start, stop, acc


def dwconv_accumulator(x: np.ndarray, weight: np.ndarray, pads, strides, dilations, dtype=np.int32) -> np.ndarray:
    """The int8 depthwise convolution's accumulator, [N, OH, OW, C] in `dtype`, exact. x int8
    NHWC, weight int8 HWC."""
    geometry = _Geometry(x.shape, weight.shape[:2], pads, strides, dilations)
    if weight.shape[2] != x.shape[3]:
        raise ValueError(f"weight of shape {list(weight.shape)} for {x.shape[3]} channels")
    rows = np.empty((geometry.rows, geometry.out_w * x.shape[3]), dtype)
    phases = geometry.padded(np.ascontiguousarray(x), np.int16, column_phases=True)
    for start, stop, acc in _dwconv_tiles(phases, weight, geometry, dtype):
        rows[start:stop] = acc
    return geometry.valid(rows).reshape(x.shape[0], geometry.out_h, geometry.out_w, x.shape[3])


def dwconv_kernel(fields: dict, params: dict, inputs: list) -> np.ndarray:
    """dwconv: int8 NHWC [N, H, W, C] -> int8 NHWC [N, OH, OW, C]: per channel, the exact int32
    sum of int8 input x int8 weight (HWC) over each window, zero padding, then requantize as conv.
    One multiply-accumulate per kernel tap, vectorized over a tile of rows of the whole batch;
    float32 (weights times 2^-output_shift, exact while |sum| + |offset| <= 2^24) or int16
    products accumulated in int32."""
    x = _check_input(fields, inputs)
    pads, strides, dilations, kernel = _pads_strides(fields)
    weight = _int8_weight(params, 3, kernel, "dwconv")
    if weight.shape[2] != x.shape[3]:
        raise ValueError(f"dwconv weight of shape {list(weight.shape)} for {x.shape[3]} channels")
    geometry = _Geometry(x.shape, kernel, pads, strides, dilations)
    _check_output(fields, geometry, x.shape[3])
    c = x.shape[3]
    plan = _Requantize(fields, params.get("bias"), c, kernel[0] * kernel[1])
    rows = np.empty((geometry.rows, geometry.out_w * c), np.int8)
    phases = geometry.padded(x, np.float32 if plan.float32 else np.int16, column_phases=True)
    if plan.float32:
        offset = np.tile(plan.scaled_offset(), geometry.out_w)  # along the [OW * C] rows
        for start, stop, acc in _dwconv_tiles(phases, weight, geometry, np.float32, plan.scale):
            np.add(acc, offset, out=acc)
            plan.finish_float(acc, rows[start:stop])
    else:
        offset = np.tile(plan.offset, geometry.out_w)
        for start, stop, acc in _dwconv_tiles(phases, weight, geometry, plan.int_dtype):
            plan.finish_int(acc, rows[start:stop], offset)
    return geometry.valid(rows).reshape(x.shape[0], geometry.out_h, geometry.out_w, c)


# --- integer kernels: checks -----------------------------------------------------------------------


def _check_input(fields: dict, inputs: list) -> np.ndarray:
    if len(inputs) != 1:
        raise ValueError(f"a conv takes one input, got {len(inputs)}")
    x = np.asarray(inputs[0])
    if x.dtype != np.int8:
        raise TypeError(f"input of dtype {x.dtype}; the kernel takes int8")
    size = fields["input_size"]
    expected = [int(size["height"]), int(size["width"]), int(fields["input_channel_num"])]
    if x.ndim != 4 or list(x.shape[1:]) != expected:
        raise ValueError(f"input of shape {list(x.shape)}; the layer takes [N, {expected[0]}, {expected[1]}, {expected[2]}]")
    return np.ascontiguousarray(x)


def _check_output(fields: dict, geometry: _Geometry, channels: int) -> None:
    size = fields["output_size"]
    expected = [int(size["height"]), int(size["width"]), int(fields["output_channel_num"])]
    if [geometry.out_h, geometry.out_w, channels] != expected:
        raise ValueError(f"the geometry gives an output of {[geometry.out_h, geometry.out_w, channels]}; "
                         f"output_size/output_channel_num say {expected}")


def _int8_weight(params: dict, ndim: int, kernel: list[int], what: str) -> np.ndarray:
    weight = np.asarray(params["weight"])
    if weight.ndim != ndim or list(weight.shape[:2]) != kernel or weight.dtype != np.int8:
        raise ValueError(f"{what} weight of shape {list(weight.shape)} ({weight.dtype}); kernel_size is {kernel}")
    return weight


# --- C emitters (core/codegen_c.py; contract in core/ops/registry.py) --------------------------------
#
# Exactness: every partial sum of a layer fits int32 when c_accumulator_bound(fields) <= 2^31 - 1
# (a bound for any int8 weights and bias, so the C depends on the fields alone); then the int32
# sums are the exact integers in whatever order they are added, and vectorized code gives the
# kernel's bytes. A layer beyond the bound sums in int64 (what the kernel then does).
#
# Speed (plain C99 that compilers vectorize; every hot loop has a literal trip count):
# conv multiplies im2col rows (the window's HWCi elements widened to int16, zero outside the
# input) by the weights widened to int16 once, at the first call, from the IR's HWCiCo
# `<symbol>_weight`, in one of two forms:
#   - "dot" (reduction K = KH * KW * Ci >= C_DOT_MIN_K): weights [Co][K'] (K' = K rounded up to
#     C_K_ALIGN with zeros), 4 pixels x 4 output channels of int16 x int16 dot products summed in
#     int32 per pass: the multiply-add of int16 pairs (pmaddwd) over long rows;
#   - "broadcast" (short reductions, e.g. a first layer's 3x3x3): weights [K][Co'] (Co' = Co
#     rounded up to 16), each input element broadcast against a row of output channels,
#     4 pixels per pass; the int16 product is exact (|int8 x int8| <= 2^14).
# dwconv copies the input into a zero-padded scratch once per call, then adds x * w (exact in
# int16) tap by tap into a row of per-channel sums: at stride 1 one flat loop over the whole
# output row per tap, against the tap's weights tiled along the row.
# Every array a layer function works in is a file-scope static, none is on its stack: GCC 12
# miscompiles some leaf functions built for AVX-512 (x86-64-v4, one of QT_SIMD's clones) that
# keep an array in the red zone (an aligned vector store at a misaligned stack address).

C_K_ALIGN = 32  # int16 elements: a 512-bit vector
C_CO_ALIGN = 16  # output channels of the broadcast form
C_DOT_MIN_K = 64
C_CHUNK_BYTES = 1 << 16  # im2col rows per chunk: about this many bytes (L1/L2)
C_INT32_MAX = 2**31 - 1


def c_accumulator_bound(fields: dict, reduction: int) -> int:
    """An upper bound of |partial sum| + |bias << bias_shift + rounding| for any int8 weights
    and bias (|int8 x int8| <= 2^14, |bias| <= 128)."""
    shift, bias_shift = int(fields["output_shift"]), int(fields["bias_shift"])
    offset = (128 << bias_shift if fields["load_bias"] else 0) + (1 << (shift - 1) if shift > 0 else 0)
    return reduction * INT8_PRODUCT_MAX + offset


def _c_requantize_plan(fields: dict, what: str) -> tuple[int, int, int, int]:
    """(output_shift, bias_shift, low, high) as `_Requantize` checks and uses them."""
    shift = int(fields["output_shift"])
    bias_shift = int(fields["bias_shift"]) if fields["load_bias"] else 0
    if not 0 <= shift <= 31:
        raise ValueError(f"{what}: output_shift {shift} outside [0, 31]: the C backend shifts an int32/int64 accumulator right")
    if not 0 <= bias_shift <= 40:
        raise ValueError(f"{what}: bias_shift {bias_shift} outside [0, 40]")
    if fields["activation_type"] == "Relu6":
        low, high = 0, min(relu6_limit(int(fields["output_log2scale"])), INT8_MAX)
    elif fields["activation_type"] == "None":
        low, high = INT8_MIN, INT8_MAX
    else:
        raise ValueError(f"{what}: activation_type {fields['activation_type']!r}; the IR has Relu6 and None")
    return shift, bias_shift, low, high


def _c_geometry(fields: dict) -> dict:
    pads, strides, dilations, kernel = _pads_strides(fields)
    size, out = fields["input_size"], fields["output_size"]
    return {"H": int(size["height"]), "W": int(size["width"]), "CI": int(fields["input_channel_num"]),
            "OH": int(out["height"]), "OW": int(out["width"]), "CO": int(fields["output_channel_num"]),
            "KH": kernel[0], "KW": kernel[1], "SH": strides[0], "SW": strides[1], "DH": dilations[0], "DW": dilations[1],
            "PT": pads[0], "PL": pads[2]}


def _c_offset(fields: dict, symbol: str, index: str, bias_shift: int, shift: int) -> str:
    """The C expression (int64) of bias << bias_shift + 2^(output_shift - 1) for channel `index`."""
    terms = [f"qt_shl64({symbol}_bias[{index}], {bias_shift})"] if fields["load_bias"] else []
    if shift > 0:
        terms.append(f"(int64_t){1 << (shift - 1)}")
    return " + ".join(terms) or "0"


def _c_comment(kind: str, fields: dict, g: dict, shift: int) -> str:
    return (f"/* {kind} {g['H']}x{g['W']}x{g['CI']} -> {g['OH']}x{g['OW']}x{g['CO']}, kernel {g['KH']}x{g['KW']}, "
            f"stride {g['SH']}x{g['SW']}, dilation {g['DH']}x{g['DW']}, pad top {g['PT']} left {g['PL']}; "
            f"{fields['activation_type']}, >> {shift} */")


def conv_emit_c(fields: dict, symbol: str) -> str:
    """conv as C: `conv_kernel` for one HWC image (the notes above), then requantize exactly as
    `requantize`: + bias << bias_shift, + 2^(output_shift - 1), floor shift (qt_floor_shift32),
    clamp to the Relu6/int8 range."""
    g = _c_geometry(fields)
    shift, bias_shift, low, high = _c_requantize_plan(fields, f"conv {symbol}")
    k = g["KH"] * g["KW"] * g["CI"]
    if c_accumulator_bound(fields, k) > C_INT32_MAX:
        return _conv_emit_c_int64(fields, symbol, g, shift, bias_shift, low, high)
    s = symbol
    # the zero-padded input (every row and column a window reads), unless no window leaves the input
    hp = max(g["H"] + g["PT"], (g["OH"] - 1) * g["SH"] + (g["KH"] - 1) * g["DH"] + 1)
    wp = max(g["W"] + g["PL"], (g["OW"] - 1) * g["SW"] + (g["KW"] - 1) * g["DW"] + 1)
    if (hp, wp) != (g["H"], g["W"]) or g["PT"] or g["PL"]:
        scratch = f"static int8_t {s}_padded[{hp * wp * g['CI']}]; /* the input, zero-padded to {hp}x{wp} */\n"
        fill = f"""    for (p = 0; p < {g['H']}; p++) /* the padding stays zero */
        memcpy({s}_padded + ((p + {g['PT']}) * {wp} + {g['PL']}) * {g['CI']}, in0 + p * {g['W'] * g['CI']}, {g['W'] * g['CI']});
"""
        padded = f"{s}_padded"
    else:
        wp, scratch, fill, padded = g["W"], "", "", "in0"
    g = {**g, "WP": wp, "K": k, "shift": shift, "low": low, "high": high}
    form = _conv_dot if k >= C_DOT_MIN_K else _conv_broadcast
    declarations, weight_index, body = form(fields, s, g)
    return f"""{_c_comment("conv", fields, g, shift)}
{declarations}{scratch}static int {s}_ready;

static void {s}_init(void)
{{
    int co, k;
    for (co = 0; co < {g['CO']}; co++) {{
        for (k = 0; k < {k}; k++)
            {s}_w16[{weight_index}] = {s}_weight[k * {g['CO']} + co];
        {s}_offset[co] = (int32_t)({_c_offset(fields, s, "co", bias_shift, shift)});
    }}
    {s}_ready = 1;
}}

QT_SIMD static void {s}(const int8_t *restrict in0, int8_t *restrict out)
{{
    const int8_t *padded = {padded};
    int p;
    if (!{s}_ready)
        {s}_init();
{fill}{body}
}}
"""


def _c_window(g: dict, pixel: str) -> str:
    """C: the padded input at the top left of output pixel `pixel`'s window."""
    return f"padded + (({pixel}) / {g['OW']} * {g['SH'] * g['WP']} + ({pixel}) % {g['OW']} * {g['SW']}) * {g['CI']}"


def _c_finish(g: dict, acc: str) -> str:
    return f"(int8_t)qt_clamp32(qt_floor_shift32({acc}, {g['shift']}), {g['low']}, {g['high']})"


def _conv_im2col(s: str, g: dict, kp: int, chunk: int) -> str:
    """C: the im2col rows (int16; a row past the last pixel zero) of output pixels
    [p, p + rows) into `<symbol>_cols`, `kp` elements apart."""
    if g["DW"] == 1:  # a kernel row's taps are KW * Ci consecutive elements
        row = f"""                const int8_t *src = window + kh * {g['DH'] * g['WP'] * g['CI']};
                int16_t *dst = col + kh * {g['KW'] * g['CI']};
                for (i = 0; i < {g['KW'] * g['CI']}; i++)
                    dst[i] = src[i];"""
    else:
        row = f"""                int kw;
                for (kw = 0; kw < {g['KW']}; kw++) {{
                    const int8_t *src = window + (kh * {g['DH'] * g['WP']} + kw * {g['DW']}) * {g['CI']};
                    int16_t *dst = col + (kh * {g['KW']} + kw) * {g['CI']};
                    for (i = 0; i < {g['CI']}; i++)
                        dst[i] = src[i];
                }}"""
    return f"""        for (r = 0; r < rows; r++) {{ /* im2col */
            int16_t *col = {s}_cols + r * {kp};
            int kh, i;
            const int8_t *window;
            if (p + r >= {g['OH'] * g['OW']}) {{
                memset(col, 0, sizeof(int16_t) * {g['K']});
                continue;
            }}
            window = {_c_window(g, "p + r")};
            for (kh = 0; kh < {g['KH']}; kh++) {{
{row}
            }}
        }}"""


def _conv_chunks(g: dict, kp: int) -> tuple[int, str]:
    """(pixels per chunk, the C loop header over chunks declaring r, co and rows)."""
    pixels = g["OH"] * g["OW"]
    chunk = min(-(-pixels // 4) * 4, max(4, C_CHUNK_BYTES // (2 * kp) // 4 * 4))
    return chunk, f"""    for (p = 0; p < {pixels}; p += {chunk}) {{
        int r, co, rows = {pixels} - p < {chunk} ? ({pixels} - p + 3) / 4 * 4 : {chunk};"""


def _conv_dot(fields: dict, s: str, g: dict) -> tuple[str, str, str]:
    """The dot form: im2col rows (int16, zero-padded to kp) of a chunk of pixels times the
    weights [Co][kp], 4 x 4 dot products per pass."""
    k, co, pixels = g["K"], g["CO"], g["OH"] * g["OW"]
    kp, cop = -(-k // C_K_ALIGN) * C_K_ALIGN, -(-co // 4) * 4
    chunk, loop = _conv_chunks(g, kp)
    sums = ", ".join(f"s{i}{j} = 0" for i in range(4) for j in range(4))
    products = "\n".join(f"                    s{i}{j} += x{i}[k] * w{j}[k];" for i in range(4) for j in range(4))
    stores = "\n".join(f"                if (q + {i} < {pixels} && co + {j} < {co}) out[(q + {i}) * {co} + co + {j}] = "
                       + _c_finish(g, f"s{i}{j} + {s}_offset[co + {j}]") + ";" for i in range(4) for j in range(4))
    declarations = f"""static int16_t {s}_w16[{cop * kp}]; /* the weights as [Co {cop}][K {kp}], int16, zero-padded */
static int32_t {s}_offset[{cop}]; /* bias << bias_shift + rounding, per output channel */
static int16_t {s}_cols[{chunk * kp}]; /* im2col rows of one chunk of output pixels */
"""
    body = f"""{loop}
{_conv_im2col(s, g, kp, chunk)}
        for (co = 0; co < {cop}; co += 4) {{ /* 4 pixels x 4 output channels of dot products */
            const int16_t *w0 = {s}_w16 + co * {kp}, *w1 = w0 + {kp}, *w2 = w1 + {kp}, *w3 = w2 + {kp};
            for (r = 0; r < rows; r += 4) {{
                const int16_t *x0 = {s}_cols + r * {kp}, *x1 = x0 + {kp}, *x2 = x1 + {kp}, *x3 = x2 + {kp};
                int32_t {sums};
                int k, q = p + r;
                for (k = 0; k < {kp}; k++) {{
{products}
                }}
{stores}
            }}
        }}
    }}"""
    return declarations, f"co * {kp} + k", body


def _conv_broadcast(fields: dict, s: str, g: dict) -> tuple[str, str, str]:
    """The broadcast form: im2col rows (int16) of a chunk of pixels; for 4 pixels at a time,
    each element times the row of the weights [K][Co'] (Co' = Co rounded up to C_CO_ALIGN),
    summed per output channel."""
    k, co, pixels = g["K"], g["CO"], g["OH"] * g["OW"]
    cop = -(-co // C_CO_ALIGN) * C_CO_ALIGN
    chunk, loop = _conv_chunks(g, k)
    declarations = f"""static int16_t {s}_w16[{k * cop}]; /* the weights as [K {k}][Co {cop}], int16, zero-padded */
static int32_t {s}_offset[{cop}]; /* bias << bias_shift + rounding, per output channel */
static int16_t {s}_cols[{chunk * k}]; /* im2col rows of one chunk of output pixels */
static int32_t {s}_acc[{4 * cop}]; /* the sums of 4 pixels */
"""
    body = f"""{loop}
{_conv_im2col(s, g, k, chunk)}
        for (r = 0; r < rows; r += 4) {{ /* 4 pixels, each element against a row of output channels */
            int32_t *a0 = {s}_acc, *a1 = a0 + {cop}, *a2 = a1 + {cop}, *a3 = a2 + {cop};
            const int16_t *x = {s}_cols + r * {k};
            int k, i;
            for (co = 0; co < {cop}; co++)
                a0[co] = a1[co] = a2[co] = a3[co] = {s}_offset[co];
            for (k = 0; k < {k}; k++) {{
                const int16_t *w = {s}_w16 + k * {cop};
                int16_t x0 = x[k], x1 = x[{k} + k], x2 = x[{2 * k} + k], x3 = x[{3 * k} + k];
                for (co = 0; co < {cop}; co++) {{
                    a0[co] += (int16_t)(x0 * w[co]);
                    a1[co] += (int16_t)(x1 * w[co]);
                    a2[co] += (int16_t)(x2 * w[co]);
                    a3[co] += (int16_t)(x3 * w[co]);
                }}
            }}
            for (i = 0; i < 4 && p + r + i < {pixels}; i++) {{
                const int32_t *a = a0 + i * {cop};
                int8_t *o = out + (p + r + i) * {co};
                for (co = 0; co < {co}; co++)
                    o[co] = {_c_finish(g, "a[co]")};
            }}
        }}
    }}"""
    return declarations, f"k * {cop} + co", body


def _conv_emit_c_int64(fields: dict, symbol: str, g: dict, shift: int, bias_shift: int, low: int, high: int) -> str:
    """A direct convolution with int64 sums, for layers whose sums could leave int32."""
    s = symbol
    return f"""{_c_comment("conv", fields, g, shift)} /* int64 sums */
static void {s}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int oh, ow, co, kh, kw, ci;
    for (oh = 0; oh < {g['OH']}; oh++)
        for (ow = 0; ow < {g['OW']}; ow++)
            for (co = 0; co < {g['CO']}; co++) {{
                int64_t acc = {_c_offset(fields, s, "co", bias_shift, shift)};
                for (kh = 0; kh < {g['KH']}; kh++) {{
                    int ih = oh * {g['SH']} - {g['PT']} + kh * {g['DH']};
                    if (ih < 0 || ih >= {g['H']})
                        continue;
                    for (kw = 0; kw < {g['KW']}; kw++) {{
                        int iw = ow * {g['SW']} - {g['PL']} + kw * {g['DW']};
                        if (iw < 0 || iw >= {g['W']})
                            continue;
                        for (ci = 0; ci < {g['CI']}; ci++)
                            acc += (int64_t)in0[(ih * {g['W']} + iw) * {g['CI']} + ci] * {s}_weight[((kh * {g['KW']} + kw) * {g['CI']} + ci) * {g['CO']} + co];
                    }}
                }}
                out[(oh * {g['OW']} + ow) * {g['CO']} + co] = (int8_t)qt_clamp64(qt_floor_shift64(acc, {shift}), {low}, {high});
            }}
}}
"""


def dwconv_emit_c(fields: dict, symbol: str) -> str:
    """dwconv as C: `dwconv_kernel` for one HWC image (the notes above): sums in int32 when
    c_accumulator_bound allows (else int64), then requantize as conv."""
    g = _c_geometry(fields)
    shift, bias_shift, low, high = _c_requantize_plan(fields, f"dwconv {symbol}")
    wide = c_accumulator_bound(fields, g["KH"] * g["KW"]) > C_INT32_MAX
    acc_type, bits = ("int64_t", 64) if wide else ("int32_t", 32)
    c, s, ow = g["CI"], symbol, g["OW"]
    # the padded input: every row and column any window reads
    hp = max(g["H"] + g["PT"], (g["OH"] - 1) * g["SH"] + (g["KH"] - 1) * g["DH"] + 1)
    wp = max(g["W"] + g["PL"], (ow - 1) * g["SW"] + (g["KW"] - 1) * g["DW"] + 1)
    row = ow * c
    if g["SW"] == 1:  # a tap's inputs for the whole output row are one contiguous run
        tiled = f"static int8_t {s}_tiled[{g['KH'] * g['KW'] * row}]; /* each tap's weights repeated along the output row */\n"
        tile = f"""    for (int t = 0; t < {g['KH'] * g['KW']}; t++)
        for (i = 0; i < {row}; i++)
            {s}_tiled[t * {row} + i] = {s}_weight[t * {c} + i % {c}];
"""
        taps = f"""                    const int8_t *x = {s}_padded + (ih * {wp} + kw * {g['DW']}) * {c}, *w = {s}_tiled + (kh * {g['KW']} + kw) * {row};
                    for (i = 0; i < {row}; i++)
                        acc[i] += (int16_t)(x[i] * w[i]);"""
    else:
        tiled, tile = "", ""
        taps = f"""                    const int8_t *w = {s}_weight + (kh * {g['KW']} + kw) * {c};
                    for (j = 0; j < {ow}; j++) {{
                        const int8_t *x = {s}_padded + (ih * {wp} + j * {g['SW']} + kw * {g['DW']}) * {c};
                        {acc_type} *a = acc + j * {c};
                        for (i = 0; i < {c}; i++)
                            a[i] += (int16_t)(x[i] * w[i]);
                    }}"""
    return f"""{_c_comment("dwconv", fields, g, shift)}
static {acc_type} {s}_offset[{c}]; /* bias << {bias_shift} + rounding, per channel */
static int8_t {s}_padded[{hp * wp * c}]; /* the input, zero-padded to {hp}x{wp} */
static {acc_type} {s}_acc[{row}]; /* one output row of sums */
{tiled}static int {s}_ready;

static void {s}_init(void)
{{
    int i;
    for (i = 0; i < {c}; i++)
        {s}_offset[i] = ({acc_type})({_c_offset(fields, s, "i", bias_shift, shift)});
{tile}    {s}_ready = 1;
}}

QT_SIMD static void {s}(const int8_t *restrict in0, int8_t *restrict out)
{{
    {acc_type} *acc = {s}_acc;
    int oh, kh, kw, i, j;
    if (!{s}_ready)
        {s}_init();
    for (i = 0; i < {g['H']}; i++) /* the padding stays zero */
        memcpy({s}_padded + ((i + {g['PT']}) * {wp} + {g['PL']}) * {c}, in0 + i * {g['W'] * c}, {g['W'] * c});
    for (oh = 0; oh < {g['OH']}; oh++) {{
        int8_t *o = out + oh * {row};
        for (j = 0; j < {ow}; j++)
            for (i = 0; i < {c}; i++)
                acc[j * {c} + i] = {s}_offset[i];
        for (kh = 0; kh < {g['KH']}; kh++) {{
            int ih = oh * {g['SH']} + kh * {g['DH']};
            for (kw = 0; kw < {g['KW']}; kw++) {{
{taps}
            }}
        }}
        for (i = 0; i < {row}; i++)
            o[i] = (int8_t)qt_clamp{bits}(qt_floor_shift{bits}(acc[i], {shift}), {low}, {high});
    }}
}}
"""


# --- accelerator lowering (core/isa.py; assembled by core/accel_codegen.py) -----------------------
#
# A tile is output rows [r0, r1) x all columns x output-channel blocks [o0, o1), reduced over
# input-channel blocks [i0, i1) at a time. Buffers: INP [input rows][padded width][i-blocks],
# WGT [tap][i-blocks][o-blocks] B x B blocks, ACC [rows][width][o-blocks]. Per tile: the bias,
# already shifted to the accumulator's scale, is loaded into ACC (no reset, no ALU add; without
# a bias a GEMM RESET), one GEMM per (tap, output block) loops over the rows, the columns and
# the input blocks, then RSHR (the rounding shift), MAX/MIN (the clamp) and STORE. A depthwise
# layer is a block-diagonal GEMM: one GEMM per tap loops over rows, columns and channel blocks.


def _accel_weights(fields: dict, params: dict, block: int) -> np.ndarray:
    """The weights as the accelerator's B x B blocks, [tap][in block][out block][out][in] (conv) or
    [tap][block][out][in] diagonal (dwconv); channels past the layer's zero."""
    kh, kw = int(fields["kernel_size"]["height"]), int(fields["kernel_size"]["width"])
    ci, co = int(fields["input_channel_num"]), int(fields["output_channel_num"])
    weight = np.asarray(params["weight"], dtype=np.int8)
    if fields["operation"] == "dwconv":
        blocks = -(-co // block)
        diagonal = np.zeros((kh * kw, blocks * block), np.int8)
        diagonal[:, :co] = weight.reshape(kh * kw, co)
        tiled = np.zeros((kh * kw, blocks, block, block), np.int8)
        lanes = np.arange(block)
        tiled[:, :, lanes, lanes] = diagonal.reshape(kh * kw, blocks, block)
        return tiled
    nib, nob = -(-ci // block), -(-co // block)
    padded = np.zeros((kh * kw, nib * block, nob * block), np.int8)
    padded[:, :ci, :co] = weight.reshape(kh * kw, ci, co)
    return padded.reshape(kh * kw, nib, block, nob, block).transpose(0, 1, 3, 4, 2).copy()


def _accel_bias(fields: dict, params: dict, block: int, what: str) -> np.ndarray:
    """bias << bias_shift as int32 per output channel (zero past the layer's)."""
    co = int(fields["output_channel_num"])
    shifted = np.zeros(-(-co // block) * block, np.int64)
    shifted[:co] = np.asarray(params["bias"], np.int64) << int(fields["bias_shift"])
    if np.abs(shifted).max(initial=0) > INT32_MAX:
        raise ValueError(f"{what}: bias << bias_shift ({int(fields['bias_shift'])}) exceeds the int32 accumulator")
    return shifted.astype(np.int32)


def accumulator_fits_int32(fields: dict, params: dict) -> bool:
    """Whether every partial sum, plus the bias at the accumulator's scale and the rounding
    constant, fits int32 for any int8 input: the accelerator's accumulators are 32-bit."""
    taps = int(fields["kernel_size"]["height"]) * int(fields["kernel_size"]["width"])
    reduction = taps * (1 if fields["operation"] == "dwconv" else int(fields["input_channel_num"]))
    weight = np.abs(np.asarray(params["weight"], np.int64)).reshape(-1, int(fields["output_channel_num"]) if fields["operation"] == "conv" else int(fields["input_channel_num"]))
    products = weight.sum(axis=0) * 128 if reduction else np.zeros(1, np.int64)
    bias = np.abs(np.asarray(params["bias"], np.int64)) << int(fields["bias_shift"]) if fields["load_bias"] else 0
    shift = int(fields["output_shift"])
    return int((products + bias).max(initial=0)) + (1 << (shift - 1) if shift > 0 else 0) <= INT32_MAX


def conv_lower_accel(fields: dict, params: dict, inputs: list, output, low, name: str) -> None:
    """conv and dwconv as accelerator instructions (the notes above), the tile chosen by the
    target's cost model among those that fit its buffers."""
    from core.backends.accel.lowering import LoweringError, Window, most_rows, spans
    from core.backends.accel.isa import Gemm, Index, Load, Loop

    (x,) = inputs
    window = Window.of(fields)
    depthwise = fields["operation"] == "dwconv"
    shift, _, clamp_low, clamp_high = _c_requantize_plan(fields, f"layer {name}")
    if not accumulator_fits_int32(fields, params):
        raise LoweringError(f"layer {name}: its accumulators could exceed int32")
    block, nib, nob = low.block, x.blocks, output.blocks
    wp = window.padded_width

    def tile_for(ib_tile: int, ob_tile: int):
        """(cost, rows) of the best row count for these block tiles; None if nothing fits."""
        weights = window.taps * (ob_tile if depthwise else ib_tile * ob_tile)
        if weights > low.wgt_units:
            return None
        rows = most_rows(window, lambda r: window.input_rows(r) * wp * ib_tile <= low.inp_units and r * window.out_width * ob_tile <= low.acc_units)
        if rows == 0:
            return None
        row_count, ob_count, ib_count = -(-window.out_height // rows), -(-nob // ob_tile), -(-nib // ib_tile)
        input_loads = row_count * (ob_count if depthwise or ib_count > 1 else 1) * (1 if depthwise else ib_count)
        input_bytes = row_count * window.input_rows(rows) * window.width * nib * block * (1 if depthwise or ib_count == 1 else ob_count)
        weight_loads = 1 if ob_count * ib_count == 1 else row_count * ob_count * (1 if depthwise else ib_count)
        weight_bytes = (1 if weight_loads == 1 else row_count) * window.taps * (nob if depthwise else nib * nob) * block * block
        instructions = row_count * ob_count * (window.taps * (1 if depthwise else ob_tile) + 4)
        return low.cycles(input_loads + weight_loads + instructions, input_bytes + weight_bytes), rows

    candidates = []
    for ob_tile in range(nob, 0, -1):
        for ib_tile in ([ob_tile] if depthwise else range(nib, 0, -1)):
            found = tile_for(ib_tile, ob_tile)
            if found is not None:
                candidates.append((found[0], -found[1], -ib_tile, -ob_tile, found[1], ib_tile, ob_tile))
    if not candidates:
        raise LoweringError(f"layer {name}: no tile of one output row and one channel block fits the buffers")
    *_, rows, ib_tile, ob_tile = min(candidates)

    weights = low.constant(_accel_weights(fields, params, block))
    bias = low.constant(_accel_bias(fields, params, block, f"layer {name}")) if fields["load_bias"] else None
    taps = [(kh, kw) for kh in range(window.kernel[0]) for kw in range(window.kernel[1])]
    for r0, r1 in spans(window.out_height, rows):
        tile_rows = r1 - r0
        for o0, o1 in spans(nob, ob_tile):
            width = o1 - o0
            shape = (tile_rows, window.out_width, width)
            what = f"{name} rows {r0}-{r1 - 1} blocks {o0}-{o1 - 1}"
            if bias is not None:
                low.emit(Load("ACC", bias + o0 * block * 4, 0, shape, (0, 0, 1), const=True, note=f"{what}: bias preload"))
            else:
                low.emit(Gemm(Loop(*shape), Index(0, window.out_width * width, width, 1), Index(0), Index(0), reset=True,
                              note=f"{what}: reset"))
            for i0, i1 in ([(o0, o1)] if depthwise else spans(nib, ib_tile)):
                depth = i1 - i0
                low.load(window.load_rows("INP", 0, x, (r0, r1), (i0, i1), 0, f"{what}: input blocks {i0}-{i1 - 1}"),
                         holds=(name, "input", r0, i0, i1))
                if depthwise:
                    low.load(Load("WGT", weights + i0 * block * block, 0, (window.taps, width, 1), (nob, 1, 0), const=True,
                                  note=f"{what}: weights"), holds=(name, "weight", i0, i1))
                else:
                    low.load(Load("WGT", weights + (i0 * nob + o0) * block * block, 0, (window.taps, depth, width), (nib * nob, nob, 1),
                                  const=True, note=f"{what}: weights, input blocks {i0}-{i1 - 1}"), holds=(name, "weight", i0, i1, o0, o1))
                for tap, (kh, kw) in enumerate(taps):
                    dh, dw = window.tap_offset(kh, kw)
                    row_step, column_step = window.stride[0] * wp * depth, window.stride[1] * depth
                    start = (dh * wp + dw) * depth
                    if depthwise:
                        low.emit(Gemm(Loop(tile_rows, window.out_width, width), Index(0, window.out_width * width, width, 1),
                                      Index(start, row_step, column_step, 1), Index(tap * width, 0, 0, 1), note=f"{what}: tap {kh},{kw}"))
                        continue
                    for ob in range(width):
                        low.emit(Gemm(Loop(tile_rows, window.out_width, depth), Index(ob, window.out_width * width, width, 0),
                                      Index(start, row_step, column_step, 1), Index((tap * depth) * width + ob, 0, 0, width),
                                      note=f"{what}: tap {kh},{kw} out block {o0 + ob}"))
            low.requantize(0, shape, shift, clamp_low, clamp_high, what)
            low.store(0, (r0, r1), output, (o0, o1), f"{what}: store")


CONV_RULE = AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION, weight=True, bias=True)

# a Pad or an atrous block's SpaceToBatchND starts the layer (named after its conv) of the IR op whose conv it feeds
register_op(IrOp("conv", ("Conv2D", *LEADING_OPS), match_conv, CONV_RULE, applies=feeds_conv("Conv2D"),
                 ir_fields=conv_ir_fields, ir_params=conv_ir_params, kernel=conv_kernel, input_kinds=("input",),
                 emit_c=conv_emit_c, lower_accel=conv_lower_accel))
register_op(IrOp("dwconv", ("DepthwiseConv2dNative", *LEADING_OPS), match_conv, CONV_RULE,
                 applies=feeds_conv("DepthwiseConv2dNative"),
                 ir_fields=conv_ir_fields, ir_params=conv_ir_params, kernel=dwconv_kernel, input_kinds=("input",),
                 emit_c=dwconv_emit_c, lower_accel=conv_lower_accel))
