"""The integers simulated quantization stands for: TensorFlow's FakeQuant rounding of values
(constants, and a function's outputs), and the 256-entry table of an element-wise function at
given scales, which the annotated graph and the IR share bit for bit."""

from __future__ import annotations

import numpy as np

from core.frontend.rewrite import evaluate_region

TABLE_SIZE = 256  # every int8


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


def lookup_table(graph, nodes: list[str], source: str, output: str, input_log2scale: int, output_log2scale: int) -> np.ndarray:
    """table[q + 128], q = -128 .. 127: the region's float function (TensorFlow's own, in float32)
    of q * 2^-input_log2scale, rounded and saturated as FakeQuant does at 2^-output_log2scale (an infinity too: rsqrt at 0,
    as TFLite's RSQRT gives its largest output there)."""
    values = np.arange(-128, 128, dtype=np.float64) * 2.0**-input_log2scale
    outputs = evaluate_region(graph, nodes, source, output, values.astype(np.float32))
    if np.any(np.isnan(outputs)):
        raise ValueError(f"the element-wise function ending at {output} is undefined (NaN) at some int8 inputs at log2scale {input_log2scale}")
    ints, _ = fake_quant_ints(outputs.reshape(TABLE_SIZE), output_log2scale)
    return ints.astype(np.int8)
