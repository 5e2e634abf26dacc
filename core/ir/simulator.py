"""Runs a TF2IR IR in integer arithmetic, layer by layer, as the hardware would.

Each layer's integer kernel is its op's (core/ops/); this module only feeds
them: the network input mapped to int8 at the IR's input log2scale, each layer
reading its producers' int8 outputs in `previous_layer` order. Every array is a
batch (NHWC), so the same code computes the IR's test tensors and whole
evaluation sets.
"""

from __future__ import annotations

import numpy as np

from core.ir.io import NETWORK_INPUT, Ir, output_log2scale_of
from core.ir.ops import IR_OPS

INT8_MIN, INT8_MAX = -128, 127


def quantize(values: np.ndarray, log2scale: int) -> np.ndarray:
    """real -> int8 at 2^-log2scale: round half up (as FakeQuant does), saturate."""
    scaled = np.floor(np.asarray(values, dtype=np.float64) * 2.0**log2scale + 0.5)
    return np.clip(scaled, INT8_MIN, INT8_MAX).astype(np.int8)


def dequantize(values: np.ndarray, log2scale: int) -> np.ndarray:
    return values.astype(np.float32) * np.float32(2.0**-log2scale)


class IntegerSimulator:
    def __init__(self, ir: Ir):
        self.ir = ir
        self.input_log2scale = ir.input_log2scale
        self.end_points = ir.end_point_layers
        # when each value can be dropped: after the last layer that reads it
        self._last_reader: dict[str, int] = {}
        for position, layer in enumerate(ir.layers):
            for name in layer["previous_layer"]:
                self._last_reader[name] = position

    def run(self, images: np.ndarray, keep_all: bool = False) -> dict[str, np.ndarray]:
        """int8 outputs of the end-point layers (of every layer with keep_all) for float images."""
        return self.run_int8(quantize(images, self.input_log2scale), keep_all)

    def run_int8(self, inputs: np.ndarray, keep_all: bool = False) -> dict[str, np.ndarray]:
        values: dict[str, np.ndarray] = {NETWORK_INPUT: inputs}
        for position, layer in enumerate(self.ir.layers):
            kernel = IR_OPS[layer["operation"]].kernel
            operands = [values[name] for name in layer["previous_layer"]]
            values[layer["name"]] = kernel(layer, self.ir.params.get(layer["name"], {}), operands)
            if not keep_all:
                for name in layer["previous_layer"]:
                    if self._last_reader[name] == position and name not in self.end_points:
                        del values[name]
        if keep_all:
            return values
        return {name: values[name] for name in self.end_points}

    def dequantized_end_points(self, outputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """End-point values in real units, in the IR's end-point order."""
        return [dequantize(outputs[name], output_log2scale_of(self.ir.layer(name))) for name in self.end_points]
