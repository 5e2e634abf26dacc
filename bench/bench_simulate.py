"""Integer simulation vs TensorFlow's float execution of the QAT graph, side by side.

    .venv/bin/python bench/bench_simulate.py [--batch 64] [--repeats 5]

Builds the TF2IR IR of mbv1_cifar10 (../shared) with its own QAT ranges, then
times one batch of CIFAR-10 test images through (a) TensorFlow running the
original QAT frozen graph and (b) the integer simulator running the IR, both
warmed up, best of `repeats`; (c) the reference path (every layer's reference
kernel) once. The budget is 1.5x. Checks that the simulator's every layer equals
the reference path's, and prints each layer kind's share of the simulation
time, which is what limits it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict

import numpy as np

from mbv1 import cifar_images, float_graph, qat_graph  # the real model and data, from ../shared

from core.quantize.calibration.methods import CalibrationSettings
from core.quantize.calibration.build import TargetSpec, build_calibration_table
from core.quantize.schemes import Pow2Symmetric
from core.ir.emit import build_ir
from core.ir.layers import group_layers
from core.ir.ops import OPS
from core.ir.fixedpoint import quantize
from core.ir.simulator import IntegerSimulator
from core.frontend.tf_runtime import GraphRunner

BUDGET = 1.5


def best_of(repeats: int, function) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    qat = qat_graph()
    folded_float, ranges = float_graph(qat)
    layer_graph = group_layers(folded_float)
    table = build_calibration_table(layer_graph, "qat", TargetSpec("tf2ir", Pow2Symmetric(input_log2scale=7)), CalibrationSettings(), None, ranges)
    ir = build_ir(layer_graph, table)
    simulator, reference = IntegerSimulator(ir), IntegerSimulator(ir, reference=True)
    images = cifar_images("test_batch", args.batch)

    with GraphRunner(qat) as runner:
        tensorflow = lambda: runner.run(qat.end_points, images, args.batch)  # noqa: E731
        integer = lambda: simulator.run(images)  # noqa: E731
        tensorflow(), integer()  # warm-up
        tf_seconds, int_seconds = best_of(args.repeats, tensorflow), best_of(args.repeats, integer)
    started = time.perf_counter()
    expected = reference.run(images, keep_all=True)
    reference_seconds = time.perf_counter() - started
    got = simulator.run(images, keep_all=True)
    same = all(np.array_equal(got[name], expected[name]) for name in expected)

    per_kind: dict[str, float] = defaultdict(float)
    values = {"input": quantize(images, simulator.input_log2scale)}
    for layer in simulator.ir.layers:
        started = time.perf_counter()
        values[layer.name] = OPS[layer.operation].simulator_kernel(layer, simulator.ir.params.get(layer.name, {}),
                                                         [values[name] for name in layer.previous_layer])
        per_kind[layer.operation] += time.perf_counter() - started
    print(f"batch {args.batch}, best of {args.repeats}")
    print(f"TensorFlow, QAT graph (float): {1000 * tf_seconds:8.1f} ms")
    print(f"integer simulator (IR):        {1000 * int_seconds:8.1f} ms")
    print(f"ratio {int_seconds / tf_seconds:.2f} (budget {BUDGET})")
    print(f"reference path (every layer's reference kernel): {1000 * reference_seconds:8.1f} ms, ratio {reference_seconds / tf_seconds:.2f}")
    print(f"every layer's output identical to the reference path's ({len(expected) - 1} layers, {len(images)} images): {'yes' if same else 'NO'}")
    total = sum(per_kind.values())
    print("simulation time by operation: " + ", ".join(f"{op} {100 * t / total:.0f}%" for op, t in sorted(per_kind.items(), key=lambda kv: -kv[1])))
    return 0 if same and int_seconds / tf_seconds <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
