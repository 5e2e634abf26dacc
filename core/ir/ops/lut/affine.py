"""Element-wise functions on the tflite_int8 scheme as TFLite computes them for int8 (LOGISTIC and TANH:
PopulateLookupTable): a 256-entry table, each entry the C library's float32 function of
input_scale x (q - input zero point), times 1 / output_scale, rounded half away from zero, plus the
output zero point, saturated; the C library's expf and tanhf are called, as the kernels do."""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=None)
def libm(name: str):
    """A float -> float function of the C math library (expf, tanhf)."""
    function = getattr(ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6"), name)
    function.restype, function.argtypes = ctypes.c_float, [ctypes.c_float]
    return function


def _logistic(value: np.float32) -> np.float32:
    return np.float32(1.0) / (np.float32(1.0) + np.float32(libm("expf")(float(-value))))


def _tanh(value: np.float32) -> np.float32:
    return np.float32(libm("tanhf")(float(value)))


FUNCTIONS = {"LOGISTIC": _logistic, "TANH": _tanh}


def lookup_table(function: str, input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int) -> np.ndarray:
    """int8 table indexed by q + 128."""
    inverse = np.float32(1.0) / np.float32(output_scale)
    table = []
    for q in range(-128, 128):
        transformed = FUNCTIONS[function](np.float32(input_scale) * np.float32(q - input_zero_point))
        scaled = np.float32(transformed * inverse)
        rounded = np.float32(np.sign(scaled) * np.floor(np.abs(np.float64(scaled)) + 0.5))
        table.append(int(np.float32(rounded + np.float32(output_zero_point))))
    return np.clip(table, -128, 127).astype(np.int8)


def lut_affine(inputs: np.ndarray, table: np.ndarray) -> np.ndarray:
    return table[inputs.astype(np.int64) + 128]
