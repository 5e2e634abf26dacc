"""The tflite_int8 dialect of the IR (TF2IR 1.2, docs/IR.md): TF2IR's layers (name, operation, previous_layer,
next_layer, sizes, window) with TFLite's int8 arithmetic instead of power-of-two shifts: activations at a
scale and a zero point (real = scale x (q - zero point)), int32 biases, per output channel a 32-bit
multiplier and a shift (TFLite's convention: positive shifts left), integer clamps. Every layer says
`"scheme": "tflite_int8"`, the key TF2IR's own layers never carry, so the existing dialect stays
byte-identical.

Every operation has one record of both dialects (core/ir/records.py: AnyDialect, its grids typed). The helpers below
read an operator of a .tflite model (core/frontend/tflite.py) as TFLite's Prepare does, for the builders (each operation
folder's tflite.py) and the .tflite interpreter alike."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import ACTIVATION_BITS, EXPLICIT_PADDING, TfliteError, TfliteModel, TfliteOperator
from core.quantize.tflite_math import activation_range, quantize_multiplier

SCHEME = "tflite_int8"


# --- an operator's parameters, as TFLite's Prepare derives them ----------------------------------------

def padding(size: int, kernel: int, stride: int, dilation: int, same: bool) -> tuple[int, int, int]:
    """(output size, padding before, after) as TFLite computes them (ComputePaddingHeightWidth): SAME's
    smaller half first."""
    effective = (kernel - 1) * dilation + 1
    out = (size + stride - 1) // stride if same else (size + stride - effective) // stride
    total = max((out - 1) * stride + effective - size, 0)
    return out, total // 2, total - total // 2


def scale_and_zero_point(model: TfliteModel, index: int) -> tuple[float, int]:
    tensor = model.tensor(index)
    if tensor.quantization is None or tensor.dtype not in ACTIVATION_BITS:
        raise TfliteError(f"{model.path}: tensor {index} ({tensor.name}) is {tensor.dtype} without int8 quantization; "
                          "the int8 kernels need int8 (or, in the 16x8 mode, int16) activations with a scale and a zero point")
    if tensor.dtype == "INT16" and int(tensor.quantization.zero_point[0]) != 0:
        raise TfliteError(f"{model.path}: tensor {index} ({tensor.name}) is INT16 with zero point "
                          f"{int(tensor.quantization.zero_point[0])}; TFLite's 16x8 kernels take symmetric int16 activations "
                          "(zero point 0): convert in the 16x8 mode")
    return float(tensor.quantization.scale[0]), int(tensor.quantization.zero_point[0])


def activation_bits(model: TfliteModel, operator: TfliteOperator) -> int:
    """The width of the operator's activations (8, or 16 in the 16x8 mode): one for its computed int8 or int16 inputs
    and its output, as TFLite's kernels take them (a computed shape is int32)."""
    widths = {ACTIVATION_BITS[model.tensor(index).dtype] for index in (*operator.inputs, *operator.outputs)
              if index >= 0 and model.tensor(index).data is None and model.tensor(index).dtype in ACTIVATION_BITS}
    if len(widths) != 1:
        types = [model.tensor(index).dtype for index in (*operator.inputs, *operator.outputs) if index >= 0]
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}) on tensors of types {types}; the IR's "
                          "operators read and write int8, or int16 (16x8 mode), throughout")
    return widths.pop()


def input_output(model: TfliteModel, operator: TfliteOperator) -> dict:
    """The fields of the operator's first input's and its output's quantization."""
    (input_scale, input_zero_point), (output_scale, output_zero_point) = (
        scale_and_zero_point(model, index) for index in (operator.inputs[0], operator.outputs[0]))
    return {"input_scale": input_scale, "input_zero_point": input_zero_point, "output_scale": output_scale,
            "output_zero_point": output_zero_point}


def product_requantization(first_scale: float, second_scale: float, output_scale: float, precision: str) -> tuple[int, int]:
    """s1 x s2 / s_out as a Q31 multiplier and a shift, from the float32 scales in float32 or in double (the runtime's
    Prepare of MUL: Runtime.scale_product_precision; BATCH_MATMUL's, in double)."""
    scales = [np.float32(scale) for scale in (first_scale, second_scale, output_scale)]
    if precision == "float":
        return quantize_multiplier(float(scales[0] * scales[1] / scales[2]))
    return quantize_multiplier(float(scales[0]) * float(scales[1]) / float(scales[2]))


def clamp(model: TfliteModel, operator: TfliteOperator) -> tuple[int, int]:
    """The int8 (int16) range of the operator's fused activation at its output's quantization."""
    bits = ACTIVATION_BITS[model.tensor(operator.outputs[0]).dtype]
    return activation_range(operator.activation, *scale_and_zero_point(model, operator.outputs[0]), -(1 << (bits - 1)),
                            (1 << (bits - 1)) - 1)


def clamp_fields(model: TfliteModel, operator: TfliteOperator) -> dict:
    low, high = clamp(model, operator)
    return {"output_min": low, "output_max": high}


def window(operator: TfliteOperator, shape, kernel: tuple[int, int]):
    """(stride, dilation, (top, bottom, left, right)) of a windowed operator on an input of NHWC `shape`."""
    stride = (operator.option("strideH", 1), operator.option("strideW", 1))
    dilation = (operator.option("dilationHFactor", 1), operator.option("dilationWFactor", 1))
    if EXPLICIT_PADDING in operator.options:  # a folded PADV2's (core/frontend/tflite.py)
        return stride, dilation, tuple(operator.options[EXPLICIT_PADDING])
    same = "padding" in operator.options and operator.padding == "SAME"  # FULLY_CONNECTED has none: a 1x1 window
    _, top, bottom = padding(shape[1], kernel[0], stride[0], dilation[0], same)
    _, left, right = padding(shape[2], kernel[1], stride[1], dilation[1], same)
    return stride, dilation, (top, bottom, left, right)


def window_fields(operator: TfliteOperator, input_shape, output_shape, kernel: tuple[int, int]) -> dict:
    """The TF2IR window fields of a windowed operator: sizes, channels, explicit padding, stride, dilations."""
    stride, dilation, (top, bottom, left, right) = window(operator, input_shape, kernel)
    return {"input_size": size(input_shape[1:3]), "input_channel_num": int(input_shape[3]),
            "output_size": size(output_shape[1:3]), "output_channel_num": int(output_shape[3]),
            "padding": {"top": top, "bottom": bottom, "left": left, "right": right},
            "stride": size(stride), "dilations": size(dilation), "kernel_size": size(kernel)}


def size(pair) -> dict:
    return {"height": int(pair[0]), "width": int(pair[1])}


def constant(model: TfliteModel, operator: TfliteOperator, position: int) -> np.ndarray:
    tensor = model.tensor(operator.inputs[position])
    if tensor.data is None:
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): input {position} ({tensor.name}) is computed; "
                          "the int8 kernels take it as a constant")
    return tensor.data


def nhwc(model: TfliteModel, index: int) -> tuple[int, ...]:
    """A tensor's shape as NHWC: an [N, C] one is [N, 1, 1, C] (the same bytes)."""
    shape = tuple(int(v) for v in model.tensor(index).shape)
    return (shape[0], 1, 1, shape[1]) if len(shape) == 2 else shape
