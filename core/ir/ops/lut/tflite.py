"""A lut layer of the tflite_int8 dialect (TF2IR 1.2): an element-wise int8 -> int8 function as a 256-entry table,
read from a .tflite's LOGISTIC, TANH, GELU, EXP, RSQRT, HARD_SWISH, LEAKY_RELU, int8 -> int8 QUANTIZE (a requantization), or MINIMUM /
MAXIMUM of a tensor and a scalar constant of its quantization (a clamp: TFLite's kernels compare the integers), or
RELU, RELU6, RELU_N1_TO_1 and RELU_0_TO_1 (a requantization and a clamp):
each table entry is what the runtime's kernel gives for that input value (affine.py computes them), so the
lookup computes that runtime's integers whatever the function. Constant: `table` int8 [256], indexed by q + 128."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import FIXED_POINT, Runtime
from core.ir.ops.lut.affine import (FIXED_POINT_OUTPUTS, FUNCTIONS, fixed_point_table, hard_swish_affine, hard_swish_parameters,
                                   leaky_relu_affine, leaky_relu_parameters, lookup_table, rsqrt_multiplier, rsqrt_table)
from core.ir.ops.lut.record import TABLE_SIZE
from core.ir.ops.lut.int16 import CLAMPS, GENERATED, OUTPUT_SCALE, OUTPUT_ZERO_POINT, PER_ELEMENT, int16_table
from core.ir.tflite_dialect import activation_bits, constant, input_output, scale_and_zero_point
from core.quantize.tflite_math import lut_populate_int16_at, quantize_multiplier, requantize, requantize_int8, round_half_away

INPUTS = np.arange(-128, 128, dtype=np.int64).astype(np.int8)  # every int8 value, in table order


def _logistic_or_tanh(model, operator, q, runtime: Runtime) -> np.ndarray:
    if runtime.logistic_tanh == FIXED_POINT:
        _check_fixed_output(model, operator, q)
        return fixed_point_table(operator.name, q["input_scale"], q["input_zero_point"])
    return lookup_table(operator.name, q["input_scale"], q["input_zero_point"], q["output_scale"], q["output_zero_point"])


def _check_fixed_output(model, operator, q) -> None:
    """The fixed-point kernels write TFLite's output quantization of the function and no other (TFLite Micro's Prepare)."""
    bits, zero_point = FIXED_POINT_OUTPUTS[operator.name]
    scale = 2.0 ** (bits - 31)
    if (float(np.float32(q["output_scale"])), q["output_zero_point"]) != (scale, zero_point):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its output is quantized at scale "
                          f"{q['output_scale']}, zero point {q['output_zero_point']}; TFLite's int8 {operator.name} writes scale "
                          f"{scale}, zero point {zero_point} (convert the model again)")


def _gelu(model, operator, q, runtime: Runtime) -> np.ndarray:
    """GELU's Prepare populates a table (LUTPopulate) of GeluTransform, or GeluTransformApproximate under `approximate`."""
    function = "GELU_TANH" if operator.option("approximate", False) else "GELU"
    return lookup_table(function, q["input_scale"], q["input_zero_point"], q["output_scale"], q["output_zero_point"])


def _exp(model, operator, q, runtime: Runtime) -> np.ndarray:
    """EXP's Prepare populates a table (LUTPopulate) of expf, as GELU's of its function."""
    return lookup_table("EXP", q["input_scale"], q["input_zero_point"], q["output_scale"], q["output_zero_point"])


def _rsqrt(model, operator, q, runtime: Runtime) -> np.ndarray:
    return rsqrt_table(q["input_scale"], q["input_zero_point"], q["output_scale"], q["output_zero_point"], runtime.scale_product_precision)


def _hard_swish(model, operator, q, runtime: Runtime) -> np.ndarray:
    parameters = hard_swish_parameters(q["input_scale"], q["output_scale"])
    return hard_swish_affine(INPUTS, q["input_zero_point"], q["output_zero_point"], parameters)


def _leaky_relu(model, operator, q, runtime: Runtime) -> np.ndarray:
    identity, alpha = leaky_relu_parameters(q["input_scale"], q["output_scale"], operator.option("alpha", 0.2))
    return leaky_relu_affine(INPUTS, q["input_zero_point"], q["output_zero_point"], identity, alpha)


def _requantize(model, operator, q, runtime: Runtime) -> np.ndarray:
    if model.tensor(operator.inputs[0]).dtype != "INT8":
        raise TfliteError(f"{model.path}: operator {operator.index} (QUANTIZE) of a {model.tensor(operator.inputs[0]).dtype} tensor; "
                          "the tflite_int8 IR takes int8 inputs (an int8 -> int8 QUANTIZE is a requantization)")
    return requantize_int8(INPUTS, q["input_scale"], q["input_zero_point"], q["output_scale"], q["output_zero_point"])


# each of TFLite's ReLU operators' bounds: the kernels requantize to the output's scale and clamp there (activations.cc
# QuantizedReluX), each bound roundf(bound / output scale) in float32 plus the output zero point
RELU_BOUNDS = {"RELU": (0.0, math.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}


def _relu(model, operator, q, runtime: Runtime) -> np.ndarray:
    low, high = RELU_BOUNDS[operator.name]
    if operator.name in runtime.relus_without_requantization and (q["input_scale"], q["input_zero_point"]) != (
            q["output_scale"], q["output_zero_point"]):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its input and output are quantized differently; "
                          f"{runtime.name}'s {operator.name} clamps the input's integers as they are (it requantizes nothing): "
                          "convert the model again, or run it on another runtime")
    output_scale = np.float32(q["output_scale"])
    multiplier, shift = quantize_multiplier(float(np.float32(q["input_scale"]) / output_scale))
    integer = lambda bound: q["output_zero_point"] + int(round_half_away(np.float32(np.float32(bound) / output_scale)))  # noqa: E731
    lowest, highest = max(-128, integer(low)), 127 if high == math.inf else min(127, integer(high))
    return requantize(INPUTS.astype(np.int64) - q["input_zero_point"], multiplier, shift, q["output_zero_point"], lowest, highest)


def _scalar_bound(model: TfliteModel, operator: TfliteOperator) -> int:
    """MINIMUM / MAXIMUM's constant, checked to be a scalar of the input's quantization: maximum_minimum.cc compares the
    integers as they are, the constant and the output at the input's quantization."""
    if len(operator.inputs) != 2 or np.size(bound := constant(model, operator, 1)) != 1:
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}) of two computed tensors or of a constant of "
                          f"several values; the tflite_int8 IR takes it of a tensor and a scalar constant (a clamp)")
    grids = {scale_and_zero_point(model, index) for index in (*operator.inputs, operator.outputs[0])}
    if len(grids) != 1:
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its input, constant and output are quantized "
                          f"differently ({sorted(grids)}); TFLite's {operator.name} compares integers of one scale and zero point")
    return int(np.asarray(bound).reshape(-1)[0])


def _minimum_or_maximum(model, operator, q, runtime: Runtime) -> np.ndarray:
    choose = np.minimum if operator.name == "MINIMUM" else np.maximum
    return choose(INPUTS, np.int8(_scalar_bound(model, operator)))


TABLES: dict[str, Callable] = {"LOGISTIC": _logistic_or_tanh, "TANH": _logistic_or_tanh, "GELU": _gelu, "EXP": _exp, "RSQRT": _rsqrt, "HARD_SWISH": _hard_swish,
                               "LEAKY_RELU": _leaky_relu, "QUANTIZE": _requantize, "MINIMUM": _minimum_or_maximum,
                               "MAXIMUM": _minimum_or_maximum, **{name: _relu for name in RELU_BOUNDS}}


def _int16_transform(operator: TfliteOperator, q: dict) -> Callable:
    """The float function a 16x8 operator's Prepare generates its table of: RSQRT's (elementwise.cc: at or below 0, the
    output's largest value, 32767 x output_scale in float32), GELU's (GeluTransform, or GeluTransformApproximate)."""
    if operator.name == "RSQRT":
        largest = np.float32(32767) * np.float32(q["output_scale"])
        return lambda value: largest if value <= 0 else np.float32(1.0) / np.sqrt(np.float32(value))
    return FUNCTIONS["GELU_TANH" if operator.option("approximate", False) else "GELU"]


def _fixed_point(operator: TfliteOperator, runtime: Runtime) -> bool:
    """Whether the runtime's int16 kernel of the operator computes each value in fixed point (int16.py: PER_ELEMENT)."""
    return operator.name in PER_ELEMENT and runtime.int16_rsqrt == FIXED_POINT


def _int16_constants(model: TfliteModel, operator: TfliteOperator, q: dict, runtime: Runtime) -> np.ndarray:
    """A 16x8 operator's constants (int16.py), its quantization checked as its Prepare checks it."""
    where = f"{model.path}: operator {operator.index} ({operator.name} on int16)"
    if _fixed_point(operator, runtime):
        return np.array(rsqrt_multiplier(q["input_scale"], q["output_scale"], runtime.scale_product_precision), np.int32)
    if operator.name in CLAMPS:
        return int16_table(operator.name, _scalar_bound(model, operator))
    if operator.name in GENERATED:  # LUTPopulate<int16_t> in float, of the layer's symmetric scales
        with np.errstate(over="ignore", invalid="ignore"):
            return lut_populate_int16_at(_int16_transform(operator, q), q["input_scale"], q["output_scale"]).astype(np.int32)
    if q["input_zero_point"] != 0 or (float(np.float32(q["output_scale"])), q["output_zero_point"]) != (OUTPUT_SCALE, OUTPUT_ZERO_POINT):
        raise TfliteError(f"{where}: input zero point {q['input_zero_point']}, output scale {q['output_scale']} and zero point "
                          f"{q['output_zero_point']}; TFLite's int16 kernel takes input zero point 0 and writes scale 1/32768, "
                          "zero point 0 (convert the model again)")
    return int16_table(operator.name)


def lut_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    quantization = input_output(model, operator)
    fields = {"shape": [int(v) for v in model.tensor(operator.inputs[0]).shape[1:]], "function": operator.name, **quantization}
    if activation_bits(model, operator) == 16:
        fixed_point = {"fixed_point": True} if _fixed_point(operator, runtime) else {}
        return {**fields, **fixed_point}, {"table": _int16_constants(model, operator, quantization, runtime)}
    table = np.asarray(TABLES[operator.name](model, operator, quantization, runtime), np.int8).reshape(TABLE_SIZE)
    return fields, {"table": table}

