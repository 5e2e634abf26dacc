"""concatenation on the tflite_int8 scheme: TFLite's converter gives every input of an int8
CONCATENATION its output's scale and zero point, so the kernel joins the integers as they are."""

from __future__ import annotations

import numpy as np


def concat_affine(inputs: list[np.ndarray], axis: int) -> np.ndarray:
    return np.concatenate(inputs, axis=axis)
