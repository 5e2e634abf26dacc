"""One .tflite writer per IR operation: the TFLite operator(s) a layer becomes, and which ones, named before anything
is written (`refusal`: what a tflite_int8 or 16x8 target cannot take is refused before calibration, every layer at
once). An operation without a writer is declared in NOT_WRITTEN (tests/test_tflite_export.py checks every operation is
one or the other); exporting a network that uses one is an ExportError naming the layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from core.backends.tflite.writer import ExportError, TfliteWriter, Unwritable
from core.frontend.layers import Layer
from core.ir.ops.lut.pattern import NamedFunction
from core.ir.tflite_dialect import padding as tflite_padding
from core.ir.tflite_ir import builders
from core.quantize.runtimes import Runtime, runtimes_taking
from core.quantize.tflite_math import UNIT_RANGE_OUTPUT, affine_quantize, requantize_int8, round_half_away

Writer = Callable[[TfliteWriter, Layer], None]


def _quantized_weight(writer: TfliteWriter, layer: Layer, values: np.ndarray, channel_axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weights in [-127, 127], per-channel scales) of float weights whose output channels lie along `channel_axis`."""
    entry = writer.table.entry(f"{layer.weight}:0")
    scales = np.broadcast_to(np.asarray(entry.grid.scales, np.float32), [values.shape[channel_axis]])
    shape = [1] * values.ndim
    shape[channel_axis] = -1
    quantized = np.clip(np.floor(values.astype(np.float64) / scales.astype(np.float64).reshape(shape) + 0.5), -127, 127)
    return quantized.astype(np.int8), scales


def _bias(writer: TfliteWriter, layer: Layer, input_scale: float, weight_scales: np.ndarray, channels: int, name: str) -> int:
    if layer.bias:
        entry = writer.table.entry(f"{layer.bias}:0")
        values = writer.layer_graph.graph.constants[layer.bias].astype(np.float64)
        if entry.correction is not None:
            values = values + np.asarray(entry.correction)
    else:
        values = np.zeros(channels)
    scales = np.float64(np.float32(input_scale)) * weight_scales.astype(np.float64)
    bias = round_half_away(values / scales)
    tensor_type, dtype = writer.bias_type
    if np.abs(bias).max(initial=0) > np.iinfo(dtype).max:
        raise ExportError(f"layer {layer.ir_name}: a bias beyond {np.dtype(dtype).name} at input scale x weight scale")
    return writer.add_tensor(name, [channels], tensor_type, scales, np.zeros(channels, np.int64), 0, bias.astype(dtype))


def _padding(writer: TfliteWriter, layer: Layer, input_index: int, fill_lowest: bool = False) -> tuple[int, int]:
    """(TFLite's padding code, the input tensor): SAME or VALID when the layer's padding is one of them; an explicit
    padding otherwise becomes a PAD (with the input's zero point) before the layer, and VALID; `fill_lowest` (a max
    pool, whose padding is never a window's maximum): a PADV2 by the type's lowest value, as litert-torch writes it."""
    attrs, shape = layer.attrs, writer.layer_graph.graph.shape(layer.inputs[0])
    if attrs.explicit_padding is None:  # a folded Pad sets it, whatever the conv's own padding said
        return getattr(writer.schema.Padding, attrs.padding), input_index
    top, bottom, left, right = attrs.explicit_padding
    dilations = getattr(attrs, "dilations", [1, 1])
    for name in ("SAME", "VALID"):
        rows = tflite_padding(shape[1], attrs.kernel[0], attrs.strides[0], dilations[0], name == "SAME")[1:]
        columns = tflite_padding(shape[2], attrs.kernel[1], attrs.strides[1], dilations[1], name == "SAME")[1:]
        if (*rows, *columns) == (top, bottom, left, right):
            return getattr(writer.schema.Padding, name), input_index
    pads = writer.add_tensor(f"{layer.name}/paddings", [4, 2], writer.schema.TensorType.INT32,
                             data=np.array([[0, 0], [top, bottom], [left, right], [0, 0]], np.int32))
    entry = writer.entry(layer.inputs[0])
    padded = writer.add_tensor(f"{layer.name}/padded", [1, shape[1] + top + bottom, shape[2] + left + right, shape[3]],
                               writer.activation_type, entry.scale, entry.zero_point)
    if fill_lowest:
        lowest = writer.add_tensor(f"{layer.name}/lowest", [], writer.activation_type, entry.scale, entry.zero_point,
                                   data=np.array(np.iinfo(writer.integer_type).min, writer.integer_type))
        writer.operator("PADV2", [input_index, pads, lowest], [padded])
    else:
        writer.operator("PAD", [input_index, pads], [padded])
    return writer.schema.Padding.VALID, padded


def _conv(writer: TfliteWriter, layer: Layer) -> None:
    graph, attrs = writer.layer_graph.graph, layer.attrs
    source = writer.activation(layer.inputs[0])
    output = writer.activation(layer.output)
    weight = graph.constants[layer.weight]
    if attrs.dense:  # MatMul [K, N] -> FULLY_CONNECTED [N, K]
        quantized, scales = _quantized_weight(writer, layer, weight, 1)
        weights = writer.add_tensor(f"{layer.name}/weights", quantized.T.shape, writer.schema.TensorType.INT8, scales,
                                    np.zeros(len(scales), np.int64), 0, np.ascontiguousarray(quantized.T))
        bias = _bias(writer, layer, writer.entry(layer.inputs[0]).scale, scales, len(scales), f"{layer.name}/bias")
        writer.operator("FULLY_CONNECTED", [source, weights, bias], [output],
                        *writer.options("FullyConnectedOptions", fusedActivationFunction=writer.fused(layer)))
        return
    code, source = _padding(writer, layer, source)
    quantized, scales = _quantized_weight(writer, layer, weight, 3)  # HWIO
    ohwi = np.ascontiguousarray(quantized.transpose(3, 0, 1, 2))
    weights = writer.add_tensor(f"{layer.name}/weights", ohwi.shape, writer.schema.TensorType.INT8, scales,
                                np.zeros(len(scales), np.int64), 0, ohwi)
    bias = _bias(writer, layer, writer.entry(layer.inputs[0]).scale, scales, len(scales), f"{layer.name}/bias")
    writer.operator("CONV_2D", [source, weights, bias], [output], *writer.options(
        "Conv2DOptions", padding=code, strideH=attrs.strides[0], strideW=attrs.strides[1], dilationHFactor=attrs.dilations[0],
        dilationWFactor=attrs.dilations[1], fusedActivationFunction=writer.fused(layer)))


def _dwconv(writer: TfliteWriter, layer: Layer) -> None:
    graph, attrs = writer.layer_graph.graph, layer.attrs
    source = writer.activation(layer.inputs[0])
    output = writer.activation(layer.output)
    kernel_h, kernel_w, channels, multiplier = graph.constants[layer.weight].shape
    flat = graph.constants[layer.weight].reshape(kernel_h, kernel_w, channels * multiplier)  # channel c * M + m, as TFLite's
    code, source = _padding(writer, layer, source)
    quantized, scales = _quantized_weight(writer, layer, flat, 2)
    weights = writer.add_tensor(f"{layer.name}/weights", [1, kernel_h, kernel_w, channels * multiplier], writer.schema.TensorType.INT8,
                                scales, np.zeros(len(scales), np.int64), 3, quantized[None])
    bias = _bias(writer, layer, writer.entry(layer.inputs[0]).scale, scales, len(scales), f"{layer.name}/bias")
    writer.operator("DEPTHWISE_CONV_2D", [source, weights, bias], [output], *writer.options(
        "DepthwiseConv2DOptions", padding=code, strideH=attrs.strides[0], strideW=attrs.strides[1], depthMultiplier=int(multiplier),
        dilationHFactor=attrs.dilations[0], dilationWFactor=attrs.dilations[1], fusedActivationFunction=writer.fused(layer)))


def _pool(name: str, fill_lowest: bool = False):
    def write(writer: TfliteWriter, layer: Layer) -> None:
        attrs = layer.attrs
        source = writer.activation(layer.inputs[0])
        if attrs.spatial_mean:  # a global average with an output scale of its own: MEAN
            axes = writer.add_tensor(f"{layer.name}/axes", [2], writer.schema.TensorType.INT32, data=np.array([1, 2], np.int32))
            writer.operator("MEAN", [source, axes], [writer.activation(layer.output)], *writer.options("ReducerOptions", keepDims=True))
            return
        code, source = _padding(writer, layer, source, fill_lowest)
        writer.operator(name, [source], [writer.activation(layer.output)], *writer.options(
            "Pool2DOptions", padding=code, strideH=attrs.strides[0], strideW=attrs.strides[1], filterHeight=attrs.kernel[0],
            filterWidth=attrs.kernel[1], fusedActivationFunction=writer.fused(layer)))
    return write


def _add(writer: TfliteWriter, layer: Layer) -> None:
    inputs = [writer.activation(tensor) for tensor in layer.inputs]
    general_scales = {"potScaleInt16": False} if writer.table.bits == 16 else {}  # the 16x8 ADD the converter writes
    writer.operator("ADD", inputs, [writer.activation(layer.output)], *writer.options(
        "AddOptions", fusedActivationFunction=writer.fused(layer), **general_scales))


def _reshape(writer: TfliteWriter, layer: Layer) -> None:
    shape = [-1, *writer.layer_graph.graph.shape(layer.output)[1:]]  # -1: any batch the interpreter is resized to
    target = writer.add_tensor(f"{layer.name}/shape", [len(shape)], writer.schema.TensorType.INT32, data=np.array(shape, np.int32))
    writer.operator("RESHAPE", [writer.activation(layer.inputs[0]), target], [writer.activation(layer.output)],
                    *writer.options("ReshapeOptions", newShape=shape))


def _transpose(writer: TfliteWriter, layer: Layer) -> None:
    permutation = np.array([0, *(axis + 1 for axis in layer.attrs)], np.int32)
    order = writer.add_tensor(f"{layer.name}/permutation", [len(permutation)], writer.schema.TensorType.INT32, data=permutation)
    writer.operator("TRANSPOSE", [writer.activation(layer.inputs[0]), order], [writer.activation(layer.output)],
                    *writer.options("TransposeOptions"))


def _batch_matmul(writer: TfliteWriter, layer: Layer) -> None:
    adj_x, adj_y = layer.attrs
    writer.operator("BATCH_MATMUL", [writer.activation(tensor) for tensor in layer.inputs], [writer.activation(layer.output)],
                    *writer.options("BatchMatMulOptions", adjX=adj_x, adjY=adj_y, asymmetricQuantizeInputs=False))


def _gather(writer: TfliteWriter, layer: Layer) -> None:
    """GATHER of the table's rows by the int32 ids: the table quantized as the output (TFLite's GATHER copies bytes)."""
    entry = writer.entry(layer.output)
    table = writer.layer_graph.graph.constants[layer.weight]
    params = writer.add_tensor(f"{layer.name}/table", table.shape, writer.activation_type, entry.scale, entry.zero_point,
                               data=affine_quantize(table, entry.scale, entry.zero_point, writer.table.bits))
    writer.operator("GATHER", [params, writer.by_graph_tensor[layer.inputs[0]]], [writer.activation(layer.output)],
                    *writer.options("GatherOptions", axis=0, batchDims=0))


def _constant(writer: TfliteWriter, layer: Layer) -> None:
    """No operator: its values quantized as the output, a constant tensor its readers take as an operand (batch one)."""
    entry, shape = writer.entry(layer.output), [1, *writer.layer_graph.graph.shape(layer.output)[1:]]
    values = np.reshape(writer.layer_graph.graph.constants[layer.weight], shape)  # of a batch of one, or none (Keras')
    writer.by_graph_tensor[layer.output] = writer.add_tensor(layer.output, shape, writer.activation_type, entry.scale, entry.zero_point,
                                                             data=affine_quantize(values, entry.scale, entry.zero_point, writer.table.bits))


def _crop(writer: TfliteWriter, layer: Layer) -> None:
    """STRIDED_SLICE of height and width by stride 1 (a Cropping2D, a recurrent layer's time step)."""
    top, bottom, left, right = layer.attrs
    height, width = writer.layer_graph.graph.shape(layer.output)[1:3]
    bounds = {"begin": [0, top, left, 0], "end": [0, top + height, left + width, 0], "strides": [1, 1, 1, 1]}
    tensors = [writer.add_tensor(f"{layer.name}/{name}", [4], writer.schema.TensorType.INT32, data=np.array(values, np.int32))
               for name, values in bounds.items()]
    everything = 0b1001  # the batch and the channels whole
    writer.operator("STRIDED_SLICE", [writer.activation(layer.inputs[0]), *tensors], [writer.activation(layer.output)],
                    *writer.options("StridedSliceOptions", beginMask=everything, endMask=everything))


def _pad(writer: TfliteWriter, layer: Layer) -> None:
    """PAD of height and width (TFLite fills with the zero point: real 0, as the graph's zeros)."""
    top, bottom, left, right = layer.attrs
    pads = writer.add_tensor(f"{layer.name}/paddings", [4, 2], writer.schema.TensorType.INT32,
                             data=np.array([[0, 0], [top, bottom], [left, right], [0, 0]], np.int32))
    writer.operator("PAD", [writer.activation(layer.inputs[0]), pads], [writer.activation(layer.output)])


def _softmax(writer: TfliteWriter, layer: Layer) -> None:
    writer.operator("SOFTMAX", [writer.activation(layer.inputs[0])], [writer.activation(layer.output)],
                    *writer.options("SoftmaxOptions", beta=layer.attrs.beta))


def _mul(writer: TfliteWriter, layer: Layer) -> None:
    inputs = [writer.activation(tensor) for tensor in layer.inputs]
    writer.operator("MUL", inputs, [writer.activation(layer.output)], *writer.options("MulOptions", fusedActivationFunction=writer.fused(layer)))


@dataclass(frozen=True)
class LutOperator:
    """The TFLite operator computing a lookup table's known function: its options table and that table's fields, and
    how many times it reads x (a square is MUL(x, x)); `from_zero`: the operator is the function only where x's grid
    starts at 0 (RSQRT is rsqrt(max(x, 0)) on such a grid; LiteRT refuses a negative input); `gate_output`: the function
    is x times the operator's output, which is written at the quantization its kernel fixes (by activation width) and
    multiplied by x with a MUL, as TFLite's converter writes SiLU (LOGISTIC, then MUL)."""

    name: str
    options: str | None = None
    fields: Callable[[NamedFunction], dict] | None = None
    reads: int = 1
    from_zero: bool = False
    gate_output: dict[int, tuple[float, int]] | None = None

    @property
    def operators(self) -> tuple[str, ...]:
        return (self.name, "MUL") if self.gate_output else (self.name,)


# a lookup table's known function (core/ir/ops/lut/pattern.py: NAMED_FUNCTIONS) -> the TFLite operator computing it
_LUT_OPERATORS = {"sigmoid": LutOperator("LOGISTIC"), "tanh": LutOperator("TANH"), "exp": LutOperator("EXP"), "hard_swish": LutOperator("HARD_SWISH"),
                  "leaky_relu": LutOperator("LEAKY_RELU", "LeakyReluOptions", lambda named: {"alpha": named.alpha}),
                  "gelu": LutOperator("GELU", "GeluOptions", lambda named: {"approximate": False}),
                  "gelu_tanh": LutOperator("GELU", "GeluOptions", lambda named: {"approximate": True}),
                  "rsqrt": LutOperator("RSQRT", from_zero=True), "square": LutOperator("MUL", "MulOptions", lambda named: {}, reads=2),
                  "silu": LutOperator("LOGISTIC", gate_output=UNIT_RANGE_OUTPUT)}


def _lut_operators(layer: Layer) -> tuple[str, ...]:
    """The TFLite operators a lookup table's function is written as (the bounds of an affine clamp where they cut in)."""
    named, affine_clamp = layer.attrs.named, layer.attrs.affine_clamp
    if named is not None and named.name in _LUT_OPERATORS:
        return _LUT_OPERATORS[named.name].operators
    if affine_clamp is not None:
        return ("DEPTHWISE_CONV_2D" if affine_clamp.affine else "QUANTIZE", "MAXIMUM", "MINIMUM")
    raise Unwritable(layer.ir_name, layer.op, f"the function {layer.attrs.function!r} has no TFLite operator the writer "
                     "knows; it writes sigmoid, tanh, hard swish, SiLU (x * sigmoid(x)), leaky ReLU, GELU (exact and tanh), exp, rsqrt, "
                     "x * x, and any chain of scalar affine maps and clamps (Rescaling, ReLU(max_value=k), hard_sigmoid, Minimum and "
                     "Maximum with a constant). target=tf2ir computes any element-wise function as a table")


def _lut(writer: TfliteWriter, layer: Layer) -> None:
    _lut_operators(layer)  # refused here when it has none
    named, affine_clamp = layer.attrs.named, layer.attrs.affine_clamp
    if named is not None and named.name in _LUT_OPERATORS:
        operator = _LUT_OPERATORS[named.name]
        # an int8 range from 0 holds no integer below real 0; an int16 grid is symmetric whatever the range, and the kernel
        # refuses a negative value when it runs (the LayerNorm rewrite's variance, a mean of squares plus epsilon, is none)
        if operator.from_zero and writer.table.bits == 8 and writer.entry(layer.inputs[0]).zero_point != -128:
            raise ExportError(f"layer {layer.ir_name} (lut): {named.name} of {layer.inputs[0]}, whose range reaches below 0 (zero "
                              f"point {writer.entry(layer.inputs[0]).zero_point}); TFLite's {operator.name} takes inputs from 0 up: "
                              "calibrate that tensor from 0 (its values are never negative)")
        arguments = writer.options(operator.options, **operator.fields(named)) if operator.options else ()
        source, output = writer.activation(layer.inputs[0]), writer.activation(layer.output)
        if operator.gate_output is None:
            writer.operator(operator.name, [source] * operator.reads, [output], *arguments)
            return
        scale, zero_point = operator.gate_output[writer.table.bits]
        gate = writer.add_tensor(f"{layer.name}/{operator.name.lower()}", [1, *writer.layer_graph.graph.shape(layer.inputs[0])[1:]],
                                 writer.activation_type, scale, zero_point)
        writer.operator(operator.name, [source], [gate], *arguments)
        writer.operator("MUL", [source, gate], [output], *writer.options(
            "MulOptions", fusedActivationFunction=writer.schema.ActivationFunctionType.NONE))
    else:
        _affine_clamp(writer, layer, affine_clamp)


def _affine_clamp(writer: TfliteWriter, layer: Layer, function) -> None:
    """clamp(a x + b, low, high) as TFLite's converter would write it, at the layer's output quantization throughout: the
    affine map as a 1x1 DEPTHWISE_CONV_2D (weight a, bias b; else an int8 QUANTIZE to the output's scale), then the bounds
    as MAXIMUM and MINIMUM with a constant, each left out where the int8 range saturates at it already."""
    output_entry = writer.entry(layer.output)
    lowest, highest = -(1 << (writer.table.bits - 1)), (1 << (writer.table.bits - 1)) - 1
    bounds = []  # (operator, integer bound): each bound that cuts into the integer range, inward of its saturating limit
    for name, bound, limit, inward in (("MAXIMUM", function.low, lowest, 1), ("MINIMUM", function.high, highest, -1)):
        if abs(bound) == np.inf:
            continue
        integer = int(round_half_away(bound / output_entry.scale)) + output_entry.zero_point
        if (integer - limit) * inward > 0:
            bounds.append((name, integer))
    shape = [1, *writer.layer_graph.graph.shape(layer.output)[1:]]
    steps = [writer.add_tensor(f"{layer.name}/{name.lower()}_input", shape, writer.activation_type, output_entry.scale,
                               output_entry.zero_point) for name, _ in bounds] + [writer.activation(layer.output)]
    source = writer.activation(layer.inputs[0])
    if function.affine:
        _affine_as_depthwise(writer, layer, function, source, steps[0])
    else:
        writer.operator("QUANTIZE", [source], [steps[0]])
    for (name, integer), before, after in zip(bounds, steps, steps[1:]):
        limit = writer.add_tensor(f"{layer.name}/{name.lower()}_bound", [], writer.activation_type, output_entry.scale,
                                  output_entry.zero_point, data=np.array(np.clip(integer, lowest, highest), writer.integer_type))
        writer.operator(name, [before, limit], [after])


def _reshape_into(writer: TfliteWriter, name: str, source: int, output: int) -> None:
    """A RESHAPE of `source` into the tensor `output` (its shape, any batch)."""
    shape = [-1, *writer.tensors[output].shape[1:]]
    target = writer.add_tensor(f"{name}/shape", [len(shape)], writer.schema.TensorType.INT32, data=np.array(shape, np.int32))
    writer.operator("RESHAPE", [source, target], [output], *writer.options("ReshapeOptions", newShape=shape))


def _like(writer: TfliteWriter, name: str, tensor: int, shape: list[int]) -> int:
    """A new activation tensor of `shape` quantized as `tensor`."""
    quantization = writer.tensors[tensor].quantization
    return writer.add_tensor(name, shape, writer.activation_type, quantization.scale, quantization.zeroPoint)


def _affine_as_depthwise(writer: TfliteWriter, layer: Layer, function, source: int, output: int) -> None:
    """The affine map as a 1x1 depthwise conv; a tensor that is not an image [N, H, W, C] (a Dense layer's [N, C], a
    sequence's [N, L, C]) is reshaped to one of height 1 around it, which moves no byte."""
    shape = writer.layer_graph.graph.shape(layer.inputs[0])
    reshaped = len(shape) != 4
    if reshaped:
        image = [1, 1, int(np.prod(shape[1:-1], dtype=np.int64)), shape[-1]]
        image_input = _like(writer, f"{layer.name}/affine_image", source, image)
        _reshape_into(writer, f"{layer.name}/affine_image", source, image_input)
        source, final_output, output = image_input, output, _like(writer, f"{layer.name}/affine_output", output, image)
    channels = shape[-1]
    weight_scale = np.float32(abs(function.scale) / 127.0)
    weights = writer.add_tensor(f"{layer.name}/affine_weights", [1, 1, 1, channels], writer.schema.TensorType.INT8,
                                np.full(channels, weight_scale), np.zeros(channels, np.int64), 3,
                                np.full((1, 1, 1, channels), 127 if function.scale > 0 else -127, np.int8))
    input_scale = np.float64(np.float32(writer.entry(layer.inputs[0]).scale))
    bias_value = round_half_away(function.offset / (input_scale * np.float64(weight_scale)))
    tensor_type, dtype = writer.bias_type
    if abs(bias_value) > np.iinfo(dtype).max:
        raise ExportError(f"layer {layer.ir_name} (lut): the offset {function.offset:.6g} is beyond {np.dtype(dtype).name} at input "
                          "scale x weight scale")
    bias = writer.add_tensor(f"{layer.name}/affine_bias", [channels], tensor_type, np.full(channels, input_scale * weight_scale),
                             np.zeros(channels, np.int64), 0, np.full(channels, bias_value, dtype))
    writer.operator("DEPTHWISE_CONV_2D", [source, weights, bias], [output], *writer.options(
        "DepthwiseConv2DOptions", padding=writer.schema.Padding.VALID, strideH=1, strideW=1, depthMultiplier=1, dilationHFactor=1,
        dilationWFactor=1, fusedActivationFunction=writer.schema.ActivationFunctionType.NONE))
    if reshaped:
        _reshape_into(writer, f"{layer.name}/affine_output", output, final_output)


def _requantized(writer: TfliteWriter, tensor: str, output_entry, name: str) -> int:
    """`tensor`'s int8 tensor at `output_entry`'s scale and zero point: itself, or a QUANTIZE of it (int8 -> int8)."""
    source, entry = writer.activation(tensor), writer.entry(tensor)
    if (entry.scale, entry.zero_point) == (output_entry.scale, output_entry.zero_point):
        return source
    shape = [1, *writer.layer_graph.graph.shape(tensor)[1:]]
    constant = writer.constant_values(source)
    if constant is not None and writer.table.bits == 8:  # a constant layer's: its QUANTIZE's integers, as TFLite's converter folds it
        return writer.add_tensor(name, writer.tensors[source].shape, writer.activation_type, output_entry.scale, output_entry.zero_point,
                                 data=requantize_int8(constant, entry.scale, entry.zero_point, output_entry.scale, output_entry.zero_point))
    rescaled = writer.add_tensor(name, shape, writer.activation_type, output_entry.scale, output_entry.zero_point)
    writer.operator("QUANTIZE", [source], [rescaled])
    return rescaled


def _concat(writer: TfliteWriter, layer: Layer) -> None:
    """TFLite's int8 CONCATENATION joins integers of one scale and zero point: each input at another is requantized."""
    output_entry = writer.entry(layer.output)
    inputs = [_requantized(writer, tensor, output_entry, f"{layer.name}/input{k}") for k, tensor in enumerate(layer.inputs)]
    axis = {"H": -3, "W": -2, "C": -1}[layer.attrs.dim]  # from the last: of an [N, C], a ViT's tokens [N, L, C] or an NHWC tensor
    writer.operator("CONCATENATION", inputs, [writer.activation(layer.output)],
                    *writer.options("ConcatenationOptions", axis=axis, fusedActivationFunction=writer.fused(layer)))


def _resize(name: str, options: str):
    def write(writer: TfliteWriter, layer: Layer) -> None:
        shape = writer.layer_graph.graph.shape(layer.output)
        size = writer.add_tensor(f"{layer.name}/size", [2], writer.schema.TensorType.INT32, data=np.array(shape[1:3], np.int32))
        writer.operator(name, [writer.activation(layer.inputs[0]), size], [writer.activation(layer.output)], *writer.options(
            options, alignCorners=layer.attrs.align_corners, halfPixelCenters=layer.attrs.half_pixel_centers))
    return write


@dataclass(frozen=True)
class OperatorWriter:
    """How a layer of one IR operation becomes TFLite operators: `write` adds them to the file; `operators` names them
    without writing, raising Unwritable where the layer has none (what a target can take is asked before calibration)."""

    write: Writer
    operators: Callable[[Layer], tuple[str, ...]]  # raises Unwritable for a layer it cannot write
    only: str = ""  # which layers of the operation it writes, where not all (the README's table says it)


def written(*operators: str) -> Callable[[Layer], tuple[str, ...]]:
    """The operators of a writer that writes the same ones for every layer."""
    return lambda layer: operators


WRITERS: dict[str, OperatorWriter] = {
    "conv": OperatorWriter(_conv, lambda layer: ("FULLY_CONNECTED",) if layer.attrs.dense else ("CONV_2D",)),
    "dwconv": OperatorWriter(_dwconv, written("DEPTHWISE_CONV_2D")),
    "avg_pool": OperatorWriter(_pool("AVERAGE_POOL_2D"), lambda layer: ("MEAN",) if layer.attrs.spatial_mean else ("AVERAGE_POOL_2D",)),
    "max_pool": OperatorWriter(_pool("MAX_POOL_2D", fill_lowest=True), written("MAX_POOL_2D")),
    "add": OperatorWriter(_add, written("ADD")),
    "reshape": OperatorWriter(_reshape, written("RESHAPE")),
    "transpose": OperatorWriter(_transpose, written("TRANSPOSE")),
    "gather": OperatorWriter(_gather, written("GATHER")),
    "constant": OperatorWriter(_constant, written()),
    "batch_matmul": OperatorWriter(_batch_matmul, written("BATCH_MATMUL")),
    "pad": OperatorWriter(_pad, written("PAD")),
    "crop": OperatorWriter(_crop, written("STRIDED_SLICE")),
    "softmax": OperatorWriter(_softmax, written("SOFTMAX")),
    "mul": OperatorWriter(_mul, written("MUL")),
    "lut": OperatorWriter(_lut, _lut_operators, "the functions " + ", ".join(sorted(_LUT_OPERATORS)) + " and affine clamps"),
    "concat": OperatorWriter(_concat, written("CONCATENATION")),
    "concat2": OperatorWriter(_concat, written("CONCATENATION")),
    "resize_bilinear": OperatorWriter(_resize("RESIZE_BILINEAR", "ResizeBilinearOptions"), written("RESIZE_BILINEAR")),
    "resize_nearest": OperatorWriter(_resize("RESIZE_NEAREST_NEIGHBOR", "ResizeNearestNeighborOptions"), written("RESIZE_NEAREST_NEIGHBOR")),
}
# operations no writer covers (a network using one is refused naming the layer)
NOT_WRITTEN: dict[str, str] = {
    "deconv": "TRANSPOSE_CONV is not written yet: target=tflite_int8 refuses a Conv2DTranspose naming the layer",
    "float_conv": "layers kept in float (calib.keep_float): an int8 .tflite keeps none",
    "float_dwconv": "layers kept in float (calib.keep_float): an int8 .tflite keeps none",
}


def refusal(layer: Layer, bits: int, runtime: Runtime | None = None) -> str | None:
    """Why a tflite_int8 target (`bits` 8) or TFLite's 16x8 mode (16) cannot take `layer`, or None: no writer, no operator
    for its function, an operator it is written as whose arithmetic at that width the IR does not have, or one the
    target's `runtime` has no kernel for. What depends on the calibration (a bias beyond int32, RSQRT of a range below 0)
    is checked on the table."""
    if layer.op in NOT_WRITTEN:
        return NOT_WRITTEN[layer.op]
    if layer.op not in WRITERS:
        return f"the .tflite writer covers {', '.join(WRITERS)}"
    try:
        operators = WRITERS[layer.op].operators(layer)
    except Unwritable as unwritable:
        return unwritable.reason
    read = builders()
    unread = [name for name in operators if name not in read]
    if unread:
        return f"it is written as {', '.join(unread)}, which the tflite_int8 IR does not read"
    narrow = [f"{name} ({read[name].name})" for name in operators if bits not in read[name].widths_of(name)]
    if narrow:
        return (f"it is written as {', '.join(operators)}; the IR computes {', '.join(narrow)} on int8 only, "
                f"{'its' if len(narrow) == 1 else 'their'} int{bits} arithmetic is not built yet")
    lacking = [name for name in operators if runtime is not None and runtime.lacks(name, bits)]
    if runtime is not None and lacking:
        having = runtimes_taking(runtime.dialect, lacking, bits)
        return (f"it is written as {', '.join(operators)}; target.scheme.runtime={runtime.name}'s interpreter has no "
                f"int{bits} kernel for {', '.join(lacking)} (target.scheme.runtime={' or '.join(having) or 'none has'})")
    return None
