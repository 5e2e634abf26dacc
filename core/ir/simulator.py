"""Runs a TF2IR IR in integer arithmetic, layer by layer, as the hardware would.

Each layer's integer kernel is its operation's (core/ir/ops/); this module only feeds them:
the network input mapped to int8 at the IR's input log2scale, each layer reading its
producers' int8 outputs in its operation's order (IrLayer.operands). Every array is a batch (NHWC), so the same
code computes the IR's test tensors and whole evaluation sets.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from core.ir.io import param_file
from core.ir.network import Ir
from core.ir.op import network_input_name, operation_of
from core.ir.records import IrError, IrLayer


WORKERS = os.cpu_count() or 1


@functools.cache
def shared_pool() -> ThreadPoolExecutor:
    """One thread per core, for work that releases the GIL (the kernels; simulate's per-layer comparisons)."""
    return ThreadPoolExecutor(WORKERS, thread_name_prefix="simulator")


def as_operand(value: np.ndarray, layer: IrLayer, position: int) -> np.ndarray:
    """`value` (a batch) in the shape `layer` reads at `position`. Every tensor is row-major HWC
    bytes, so a producer's [N, K] is a reader's [N, 1, 1, K] unchanged (a dense layer after a
    Flatten); only the sizes must agree."""
    shape = tuple(layer.shape_of_input(position))
    if tuple(value.shape[1:]) == shape:
        return value
    if int(np.prod(value.shape[1:])) != int(np.prod(shape)):
        raise IrError(f"layer {layer.name}: operand {position} ({layer.operands()[position]}) holds {list(value.shape[1:])} "
                      f"per image; the layer reads {list(shape)}")
    return value.reshape(len(value), *shape)


class IntegerSimulator:
    """reference=True runs every operation's reference kernel; by default each runs its fast
    kernel where it has one (the same integers: tests/test_simulator_paths.py)."""

    def __init__(self, ir: Ir, reference: bool = False):
        self.ir = ir
        self.input_grids = {name: ir.grid_of_network_input(name) for name in ir.network_inputs}  # in the program's order
        self.end_points = ir.end_point_layers
        self.kernels = [operation_of(layer).kernel if reference else operation_of(layer).simulator_kernel for layer in ir.layers]
        # when each value can be dropped: after the last layer that reads it
        self._last_reader: dict[str, int] = {}
        for position, layer in enumerate(ir.layers):
            for name in layer.previous_layer:
                self._last_reader[name] = position

    def run(self, images, keep_all: bool = False) -> dict[str, np.ndarray]:
        """int8 outputs of the end-point layers (of every layer with keep_all) for float images (a model of several inputs:
        {input name: its samples}, named as the model names them)."""
        return self.run_int8(self.quantized(images), keep_all)

    def quantized(self, images) -> dict[str, np.ndarray]:
        """{network input's IR name: its integers} of a batch: an array is the one input's; a model of several inputs' by the
        model's names."""
        if not isinstance(images, dict):
            (name, grid), *others = self.input_grids.items()
            if others:
                raise IrError(f"one array of inputs, and the IR has {len(self.input_grids)} network inputs ({', '.join(self.input_grids)})")
            return {name: grid.quantize(images)}
        named = {network_input_name(name): values for name, values in images.items()}
        if sorted(named) != sorted(self.input_grids):
            raise IrError(f"inputs {', '.join(sorted(named))}; the IR's network inputs are {', '.join(self.input_grids)}")
        return {name: grid.quantize(named[name]) for name, grid in self.input_grids.items()}

    def run_int8(self, inputs, keep_all: bool = False) -> dict[str, np.ndarray]:
        """As `run`, for int8 inputs. A batch of at least two images per core is split among the
        cores, each share run through every layer with single-threaded kernels: the images are
        independent, and one thread per core does not wait at every layer for the others (the
        BLAS's and the compiled kernels' own threads, each spinning between calls, made one
        another wait: the fast kernels ran 1.5x slower side by side than alone). `inputs`: the one network input's
        integers, or {network input's IR name: its integers}."""
        inputs = inputs if isinstance(inputs, dict) else {next(iter(self.input_grids)): inputs}
        count = len(next(iter(inputs.values())))
        workers = min(WORKERS, count // 2)
        if workers < 2:
            return self._run_share(inputs, keep_all)
        parts = {name: np.array_split(values, workers) for name, values in inputs.items()}
        shares = [{name: parts[name][k] for name in inputs} for k in range(workers)]
        with threadpool_limits(1, user_api="blas"):
            results = list(shared_pool().map(lambda share: self._run_share(share, keep_all), shares))
        return {name: np.concatenate([result[name] for result in results]) for name in results[0]}

    def _run_share(self, inputs: dict[str, np.ndarray], keep_all: bool) -> dict[str, np.ndarray]:
        values: dict[str, np.ndarray] = dict(inputs)
        for position, (layer, kernel) in enumerate(zip(self.ir.layers, self.kernels)):
            operands = [as_operand(values[name], layer, position) for position, name in enumerate(layer.operands())]
            values[layer.name] = self._run_layer(kernel, layer, operands)
            if not keep_all:
                for name in dict.fromkeys(layer.previous_layer):  # a square's MUL(x, x) reads x twice
                    if self._last_reader[name] == position and name not in self.end_points:
                        del values[name]
        if keep_all:
            return values
        return {name: values[name] for name in self.end_points}

    def _run_layer(self, kernel, layer: IrLayer, operands: list[np.ndarray]) -> np.ndarray:
        """One layer's kernel; what it refuses of the layer's fields or constants (a weight of the wrong shape) named
        with the layer and the files its constants come from."""
        params = self.ir.params.get(layer.name, {})
        try:
            return kernel(layer, params, operands)
        except IrError:
            raise
        except (ValueError, TypeError) as error:
            files = ", ".join(f"{param_file(Path(), layer.name, kind)} ({np.asarray(value).dtype} {list(np.shape(value))})"
                              for kind, value in params.items()) or "none"
            raise IrError(f"layer {layer.name} ({layer.operation}): its kernel refused it ({error}); its constants, from "
                          f"the IR's {files}, must agree with its fields in net_def.json: run emit_ir again to write them") from None

    def dequantized_end_points(self, outputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """End-point values in real units, in the IR's end-point order."""
        return [self.ir.layer(name).grid_of_output().dequantize(outputs[name]) for name in self.end_points]

    @property
    def input_log2scale(self) -> int:
        return self.ir.input_log2scale
