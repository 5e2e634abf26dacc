"""An int8 `.tflite` model (core/frontend/tflite.py) run operator by operator with the tflite_int8
scheme's kernels (core/ir/ops/*/affine.py), every tensor kept: what the simulator of the tflite_int8
target computes, compared tensor by tensor with TensorFlow Lite's reference kernels
(core/quantize/tflite_reference.py). Each operator's row in KERNELS derives its kernel's parameters
from the tensors' quantization exactly as TFLite's Prepare does; an operator without a row is refused
naming it and its index."""

from __future__ import annotations

from typing import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.ir.ops.add.affine import add_affine, add_requantization
from core.ir.ops.concat.affine import concat_affine
from core.ir.ops.conv.affine import fully_connected_affine, padding, requantization
from core.ir.ops.conv.affine_fast import conv_affine_fast
from core.ir.ops.lut.affine import (hard_swish_affine, hard_swish_parameters, leaky_relu_affine, leaky_relu_parameters, lookup_table,
                                    lut_affine)
from core.ir.ops.mul.affine import mul_affine, mul_requantization
from core.ir.ops.pool.affine import average_pool_affine, max_pool_affine, mean_affine
from core.ir.ops.resize.affine import resize_bilinear_affine, resize_nearest_affine
from core.ir.ops.softmax.affine import softmax_affine, softmax_table
from core.ir.simulator import WORKERS, shared_pool
from core.quantize.tflite_math import activation_range, affine_quantize, dequantize, quantize_multiplier, requantize

Values = dict[int, np.ndarray]


def _operand(model: TfliteModel, values: Values, index: int) -> np.ndarray:
    """A computed tensor's value, or a constant's (an int8 tensor stored in the file)."""
    return values[index] if index in values else model.tensor(index).data


def _scale_and_zero_point(model: TfliteModel, index: int) -> tuple[float, int]:
    tensor = model.tensor(index)
    if tensor.quantization is None or tensor.dtype != "INT8":
        raise TfliteError(f"{model.path}: tensor {index} ({tensor.name}) is {tensor.dtype} without int8 quantization; "
                          "the int8 kernels need int8 activations with a scale and a zero point")
    return float(tensor.quantization.scale[0]), int(tensor.quantization.zero_point[0])


def _clamp(model: TfliteModel, operator: TfliteOperator) -> tuple[int, int]:
    return activation_range(operator.activation, *_scale_and_zero_point(model, operator.outputs[0]))


def _window(operator: TfliteOperator, shape, kernel: tuple[int, int]):
    stride = (operator.option("strideH", 1), operator.option("strideW", 1))
    dilation = (operator.option("dilationHFactor", 1), operator.option("dilationWFactor", 1))
    same = operator.padding == "SAME"
    _, top, bottom = padding(shape[1], kernel[0], stride[0], dilation[0], same)
    _, left, right = padding(shape[2], kernel[1], stride[1], dilation[1], same)
    return stride, dilation, (top, bottom, left, right)


def _weighted(model: TfliteModel, operator: TfliteOperator, values: Values):
    inputs, weight_index = values[operator.inputs[0]], operator.inputs[1]
    weight = model.tensor(weight_index)
    bias = model.tensor(operator.inputs[2]).data if len(operator.inputs) > 2 and operator.inputs[2] >= 0 else None
    input_scale, input_zero_point = _scale_and_zero_point(model, operator.inputs[0])
    output_scale, output_zero_point = _scale_and_zero_point(model, operator.outputs[0])
    if weight.data is None or weight.quantization is None:
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its weight {weight.name} is not a quantized constant")
    multipliers, shifts = requantization(input_scale, weight.quantization.scale, output_scale)
    return inputs, weight.data, bias, input_zero_point, multipliers, shifts, output_zero_point


def _conv(model, operator, values, depthwise: bool = False):
    inputs, weight, bias, zero_point, multipliers, shifts, output_zero_point = _weighted(model, operator, values)
    stride, dilation, pads = _window(operator, inputs.shape, weight.shape[1:3])
    return conv_affine_fast(inputs, zero_point, weight, bias, multipliers, shifts, output_zero_point, _clamp(model, operator),
                       stride, dilation, pads, depthwise=depthwise)


def _fully_connected(model, operator, values):
    inputs, weight, bias, zero_point, multipliers, shifts, output_zero_point = _weighted(model, operator, values)
    return fully_connected_affine(inputs, zero_point, weight, bias, multipliers, shifts, output_zero_point, _clamp(model, operator))


def _add(model, operator, values):
    first, second = (_operand(model, values, index) for index in operator.inputs)
    if first.shape != second.shape:
        raise TfliteError(f"{model.path}: operator {operator.index} (ADD) of shapes {list(first.shape)} and {list(second.shape)}; "
                          "the int8 kernels add tensors of one shape")
    (first_scale, first_zero), (second_scale, second_zero), (output_scale, output_zero) = (
        _scale_and_zero_point(model, index) for index in (*operator.inputs, operator.outputs[0]))
    return add_affine(first, second, (first_zero, second_zero), add_requantization(first_scale, second_scale, output_scale),
                      output_zero, _clamp(model, operator))


def _pool(kernel: Callable):
    def run(model, operator, values):
        inputs = values[operator.inputs[0]]
        size = (operator.option("filterHeight"), operator.option("filterWidth"))
        stride, _, pads = _window(operator, inputs.shape, size)
        return kernel(inputs, size, stride, pads, _clamp(model, operator))
    return run


def _reshape(model, operator, values):
    inputs = values[operator.inputs[0]]
    shape = model.tensor(operator.outputs[0]).shape
    return inputs.reshape(len(inputs), *shape[1:])


def _softmax(model, operator, values):
    input_scale, _ = _scale_and_zero_point(model, operator.inputs[0])
    output_scale, output_zero_point = _scale_and_zero_point(model, operator.outputs[0])
    table = softmax_table(input_scale, operator.option("beta", 1.0))
    return softmax_affine(values[operator.inputs[0]], table, output_scale, output_zero_point)


def _mul(model, operator, values):
    first, second = (_operand(model, values, index) for index in operator.inputs)
    (first_scale, first_zero), (second_scale, second_zero), (output_scale, output_zero) = (
        _scale_and_zero_point(model, index) for index in (*operator.inputs, operator.outputs[0]))
    return mul_affine(first, second, (first_zero, second_zero), mul_requantization(first_scale, second_scale, output_scale),
                      output_zero, _clamp(model, operator))


def _constant(model: TfliteModel, operator: TfliteOperator, position: int) -> np.ndarray:
    tensor = model.tensor(operator.inputs[position])
    if tensor.data is None:
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): input {position} ({tensor.name}) is computed; "
                          "the int8 kernels take it as a constant")
    return tensor.data


def _mean(model, operator, values):
    inputs = values[operator.inputs[0]]
    axes = tuple(sorted(int(axis) % inputs.ndim for axis in np.atleast_1d(_constant(model, operator, 1))))
    (input_scale, input_zero), (output_scale, output_zero) = (_scale_and_zero_point(model, index)
                                                              for index in (operator.inputs[0], operator.outputs[0]))
    multiplier, shift = quantize_multiplier(float(np.float32(input_scale)) / float(np.float32(output_scale)))
    return mean_affine(inputs, axes, bool(operator.option("keepDims", False)), input_zero, multiplier, shift, output_zero)


def _pad(model, operator, values):
    _, zero_point = _scale_and_zero_point(model, operator.outputs[0])
    return np.pad(values[operator.inputs[0]], _constant(model, operator, 1).astype(np.int64).tolist(), constant_values=zero_point)


def _concatenation(model, operator, values):
    output = _scale_and_zero_point(model, operator.outputs[0])
    rescaled = [index for index in operator.inputs if _scale_and_zero_point(model, index) != output]
    if rescaled or operator.activation != "NONE":
        raise TfliteError(f"{model.path}: operator {operator.index} (CONCATENATION): inputs {rescaled} at another scale or zero point "
                          f"than the output, or a fused activation; TFLite's converter gives them the output's")
    return concat_affine([values[index] for index in operator.inputs], operator.option("axis", 0))


def _lut(model, operator, values):
    table = lookup_table(operator.name, *_scale_and_zero_point(model, operator.inputs[0]), *_scale_and_zero_point(model, operator.outputs[0]))
    return lut_affine(values[operator.inputs[0]], table)


def _hard_swish(model, operator, values):
    (input_scale, input_zero), (output_scale, output_zero) = (_scale_and_zero_point(model, index)
                                                              for index in (operator.inputs[0], operator.outputs[0]))
    return hard_swish_affine(values[operator.inputs[0]], input_zero, output_zero, hard_swish_parameters(input_scale, output_scale))


def _leaky_relu(model, operator, values):
    (input_scale, input_zero), (output_scale, output_zero) = (_scale_and_zero_point(model, index)
                                                              for index in (operator.inputs[0], operator.outputs[0]))
    identity, alpha = leaky_relu_parameters(input_scale, output_scale, operator.option("alpha", 0.2))
    return leaky_relu_affine(values[operator.inputs[0]], input_zero, output_zero, identity, alpha)


def _resize(kernel: Callable):
    def run(model, operator, values):
        if _scale_and_zero_point(model, operator.inputs[0]) != _scale_and_zero_point(model, operator.outputs[0]):
            raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its input and output are quantized "
                              "differently; TFLite's int8 resizes keep the input's scale and zero point")
        size = tuple(int(v) for v in _constant(model, operator, 1))
        return kernel(values[operator.inputs[0]], size, bool(operator.option("alignCorners", False)),
                      bool(operator.option("halfPixelCenters", False)))
    return run


def _quantize(model, operator, values):
    """float32 -> int8, or int8 -> int8 at another scale (the converter's requantization before a concatenation)."""
    output_scale, output_zero = _scale_and_zero_point(model, operator.outputs[0])
    if model.tensor(operator.inputs[0]).dtype == "FLOAT32":
        return affine_quantize(values[operator.inputs[0]], output_scale, output_zero)
    input_scale, input_zero = _scale_and_zero_point(model, operator.inputs[0])
    multiplier, shift = quantize_multiplier(float(np.float32(input_scale)) / float(np.float32(output_scale)))
    return requantize(values[operator.inputs[0]].astype(np.int64) - input_zero, multiplier, shift, output_zero, -128, 127)


def _dequantize(model, operator, values):
    return dequantize(values[operator.inputs[0]], *_scale_and_zero_point(model, operator.inputs[0]))


KERNELS: dict[str, Callable[[TfliteModel, TfliteOperator, Values], np.ndarray]] = {
    "CONV_2D": _conv,
    "DEPTHWISE_CONV_2D": lambda model, operator, values: _conv(model, operator, values, depthwise=True),
    "FULLY_CONNECTED": _fully_connected,
    "ADD": _add,
    "AVERAGE_POOL_2D": _pool(average_pool_affine),
    "MAX_POOL_2D": _pool(max_pool_affine),
    "RESHAPE": _reshape,
    "SOFTMAX": _softmax,
    "MUL": _mul,
    "MEAN": _mean,
    "PAD": _pad,
    "CONCATENATION": _concatenation,
    "LOGISTIC": _lut,
    "TANH": _lut,
    "HARD_SWISH": _hard_swish,
    "LEAKY_RELU": _leaky_relu,
    "RESIZE_NEAREST_NEIGHBOR": _resize(resize_nearest_affine),
    "RESIZE_BILINEAR": _resize(resize_bilinear_affine),
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
}


def run_int8(model: TfliteModel, inputs: np.ndarray) -> Values:
    """Every tensor (by index) after running `model` on `inputs` (a batch in the model's input type: int8,
    or float32 for a model that quantizes its input itself). A batch of at least two images per core is
    split among the cores, each share through every operator with single-threaded BLAS, as the
    simulator splits its batches (core/ir/simulator.py)."""
    missing = [f"{operator.name} (operator {operator.index})" for operator in model.operators if operator.name not in KERNELS]
    if missing:
        raise TfliteError(f"{model.path}: no int8 kernel yet for {', '.join(missing)}; the tflite_int8 kernels cover "
                          f"{', '.join(KERNELS)}")
    inputs = np.asarray(inputs, model.tensor(model.inputs[0]).numpy_dtype)
    workers = min(WORKERS, len(inputs) // 2)
    if workers < 2:
        return _run_share(model, inputs)
    with threadpool_limits(1, user_api="blas"):
        shares = list(shared_pool().map(lambda share: _run_share(model, share), np.array_split(inputs, workers)))
    return {index: np.concatenate([share[index] for share in shares]) for index in shares[0]}


def _run_share(model: TfliteModel, inputs: np.ndarray) -> Values:
    values: Values = {model.inputs[0]: inputs}
    for operator in model.operators:
        values[operator.outputs[0]] = KERNELS[operator.name](model, operator, values)
    return values
