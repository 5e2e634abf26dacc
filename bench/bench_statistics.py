"""Statistics collection vs plain float inference, side by side in one process.

    .venv/bin/python bench/bench_statistics.py [--images 932] [--batch-size 32] [--repeats 3]

Runs the folded float graph of mbv1_cifar10 (from ../shared) on CIFAR-10
training images: once fetching only the end point (what inference costs), once
through calibrate's statistics collection (every quantized tensor observed in
the same execution, reduced in the graph, histograms merged). Two figures:
end to end (session set-up included, as one calibrate run pays it) and steady
state (both sessions warmed up, the per-batch cost). The budget is 1.5x.
"""

from __future__ import annotations

import argparse
import sys
import time

from mbv1 import cifar_images, float_graph  # the real model and data, from ../shared

from core.ir.layers import group_layers
from core.frontend.tf_runtime import GraphRunner
from core.quantize.statistics import StatisticsCollector, collect_statistics

BUDGET = 1.5


def time_inference(graph, images, batch_size) -> float:
    started = time.perf_counter()
    with GraphRunner(graph) as runner:
        for _ in runner.batches(graph.end_points, images, batch_size):
            pass
    return time.perf_counter() - started


def time_statistics(graph, tensors, images, batch_size) -> float:
    started = time.perf_counter()
    collect_statistics(graph, tensors, images, batch_size, 2048, "bench", lambda done, total: None)
    return time.perf_counter() - started


def steady_state(graph, tensors, images, batch_size, repeats) -> tuple[float, float]:
    """Best-of-`repeats` seconds for all `images`, sessions built and warmed up beforehand."""
    runner = GraphRunner(graph)
    collector = StatisticsCollector(graph, tensors, 2048, "bench")
    warm = images[:batch_size]
    list(runner.batches(graph.end_points, warm, batch_size))
    collector.observe(warm, batch_size)
    inference, statistics = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in runner.batches(graph.end_points, images, batch_size):
            pass
        inference.append(time.perf_counter() - started)
        started = time.perf_counter()
        collector.observe(images, batch_size)
        statistics.append(time.perf_counter() - started)
    runner.close()
    collector.close()
    return min(inference), min(statistics)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=932)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    graph = float_graph()[0]
    tensors = group_layers(graph).quantized_tensors()
    images = cifar_images("data_batch_1", args.images)
    time_inference(graph, images[: args.batch_size], args.batch_size)  # warm-up: kernels, allocator
    inference, statistics = [], []
    for _ in range(args.repeats):  # interleaved so drift in machine load hits both alike
        inference.append(time_inference(graph, images, args.batch_size))
        statistics.append(time_statistics(graph, tensors, images, args.batch_size))
    steady_inference, steady_statistics = steady_state(graph, tensors, images, args.batch_size, args.repeats)
    print(f"{len(images)} images, batch {args.batch_size}, {len(tensors)} tensors observed, best of {args.repeats}")
    for label, base, measured in (("end to end  ", min(inference), min(statistics)),
                                  ("steady state", steady_inference, steady_statistics)):
        print(f"{label}: float inference {base:6.3f} s ({1000 * base / len(images):.2f} ms/image), "
              f"statistics {measured:6.3f} s ({1000 * measured / len(images):.2f} ms/image), "
              f"ratio {measured / base:.2f} (budget {BUDGET})")
    return 0 if steady_statistics / steady_inference <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
