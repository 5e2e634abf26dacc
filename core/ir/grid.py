"""What an int8 tensor of the IR means in real units, as the layers that produce or read it declare it:
a power-of-two grid (TF2IR: real = q x 2^-log2scale, round half up) or an affine one (the tflite_int8
dialect: real = scale x (q - zero point), TFLite's rounding). The simulator maps the network input with
its readers' grid, and reports dequantize the end points with their producers'."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.ir import fixedpoint
from core.quantize import tflite_math


@dataclass(frozen=True)
class Pow2Grid:
    log2scale: int

    def quantize(self, values: np.ndarray) -> np.ndarray:
        return fixedpoint.quantize(values, self.log2scale)

    def dequantize(self, values: np.ndarray) -> np.ndarray:
        return fixedpoint.dequantize(values, self.log2scale)


@dataclass(frozen=True)
class AffineGrid:
    scale: float
    zero_point: int

    def quantize(self, values: np.ndarray) -> np.ndarray:
        return tflite_math.affine_quantize(values, self.scale, self.zero_point)

    def dequantize(self, values: np.ndarray) -> np.ndarray:
        return tflite_math.dequantize(values, self.scale, self.zero_point)
