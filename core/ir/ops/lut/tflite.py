"""A lut layer of the tflite_int8 dialect (TF2IR 1.2): an element-wise int8 -> int8 function as a 256-entry table,
read from a .tflite's LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU or int8 -> int8 QUANTIZE (a requantization):
each table entry is what the runtime's kernel gives for that input value (affine.py computes them), so the
lookup computes that runtime's integers whatever the function. Constant: `table` int8 [256], indexed by q + 128."""

from __future__ import annotations

from typing import Callable

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import FIXED_POINT, Runtime
from core.ir.ops.lut.affine import (FIXED_POINT_OUTPUTS, fixed_point_table, hard_swish_affine, hard_swish_parameters, leaky_relu_affine,
                                   leaky_relu_parameters, lookup_table)
from core.ir.ops.lut.record import TABLE_SIZE
from core.ir.tflite_dialect import input_output
from core.quantize.tflite_math import quantize_multiplier, requantize

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
    multiplier, shift = quantize_multiplier(float(np.float32(q["input_scale"])) / float(np.float32(q["output_scale"])))
    return requantize(INPUTS.astype(np.int64) - q["input_zero_point"], multiplier, shift, q["output_zero_point"], -128, 127)


TABLES: dict[str, Callable] = {"LOGISTIC": _logistic_or_tanh, "TANH": _logistic_or_tanh, "HARD_SWISH": _hard_swish,
                               "LEAKY_RELU": _leaky_relu, "QUANTIZE": _requantize}


def lut_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    quantization = input_output(model, operator)
    table = np.asarray(TABLES[operator.name](model, operator, quantization, runtime), np.int8).reshape(TABLE_SIZE)
    return {"shape": [int(v) for v in model.tensor(operator.inputs[0]).shape[1:]], "function": operator.name, **quantization}, {"table": table}

