"""softmax on the tflite_int8 scheme, as TFLite computes it for int8 (its SOFTMAX kernel, the same for
the reference and optimized resolvers: optimized_ops::Softmax with PopulateSoftmaxLookupTable): a
256-entry float32 table exp(-input_scale x beta x d) for d = 0..255 (C's expf), per row the float32
sum of the entries of (x - row max) in order, its reciprocal times the output scale, each probability
rounded half away from zero plus the output zero point, saturated. expf is called from the C library,
as the kernel does: numpy's exp may differ from it in the last bit."""

from __future__ import annotations

import numpy as np

from core.quantize.tflite_math import libm, round_half_away


def softmax_table(input_scale: float, beta: float) -> np.ndarray:
    """table[255 - d] = expf(-input_scale * beta * d), the product in float32."""
    scale = np.float32(-np.float32(input_scale) * np.float32(beta))
    values = [libm("expf")(float(np.float32(scale * np.float32(d)))) for d in range(256)]
    return np.asarray(values[::-1], np.float32)


def softmax_affine(inputs: np.ndarray, table: np.ndarray, output_scale: float, output_zero_point: int) -> np.ndarray:
    """int8 [..., D] -> int8 [..., D] along the last axis."""
    rows = inputs.reshape(-1, inputs.shape[-1]).astype(np.int64)
    row_max = rows.max(axis=1, keepdims=True)
    exps = table[255 - row_max + rows]  # float32
    sums = np.cumsum(exps, axis=1, dtype=np.float32)[:, -1:]  # in order, as the C loop adds them
    inverse = np.float32(1.0) / (sums * np.float32(output_scale))
    probabilities = exps * inverse
    rounded = round_half_away(probabilities)  # std::round
    return np.clip(rounded.astype(np.int64) + output_zero_point, -128, 127).astype(np.int8).reshape(inputs.shape)
