"""Statistics collection vs plain float inference, side by side in one process.

    .venv/bin/python bench/bench_statistics.py [--images 932] [--batch-size 32] [--repeats 7]

Runs the folded float graph of mbv1_cifar10 (from ../shared) on CIFAR-10
training images: once fetching only the end point (what inference costs), once
through calibrate's statistics collection (every quantized tensor fetched in the
same execution, extrema and histograms computed beside the graph, merged), and
once through the in-graph reference path (the reductions and histograms as
TensorFlow ops, what calibrate ran before). Two figures: end to end (session
set-up included, as one calibrate run pays it) and steady state (both sessions
warmed up, the per-batch cost), each the best of the repeats, and the median of
the steady state's back-to-back ratios (what the exit status judges: the
least sensitive to a noisy machine). Then checks that the collection's statistics
are the reference path's, bit for bit. The budget is 1.5x.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from mbv1 import cifar_images, float_graph  # the real model and data, from ../shared

from core.ir.layers import group_layers
from core.frontend.tf_runtime import GraphRunner
from core.quantize.statistics import StatisticsCollector, collect_statistics, in_graph_statistics

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


def time_reference(graph, tensors, images, batch_size) -> float:
    started = time.perf_counter()
    in_graph_statistics(graph, tensors, images, batch_size, 2048)
    return time.perf_counter() - started


def identical(collected, reference) -> bool:
    return all((a.count, a.min, a.max, a.absmax) == (b.count, b.min, b.max, b.absmax) and np.array_equal(a.counts, b.counts)
               for a, b in ((collected[tensor], reference[tensor]) for tensor in reference))


def steady_state(graph, tensors, images, batch_size, repeats) -> tuple[float, float, float]:
    """Best-of-`repeats` seconds for all `images`, sessions built and warmed up beforehand, and the
    median of the repeats' own ratios (each pair run back to back)."""
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
    return min(inference), min(statistics), float(np.median(np.array(statistics) / np.array(inference)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=932)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)  # a 2-core VM's timings vary +-15% run to run
    args = parser.parse_args()
    graph = float_graph()[0]
    tensors = group_layers(graph).quantized_tensors()
    images = cifar_images("data_batch_1", args.images)
    time_inference(graph, images[: args.batch_size], args.batch_size)  # warm-up: kernels, allocator
    inference, statistics, reference = [], [], []
    for _ in range(args.repeats):  # interleaved so drift in machine load hits all alike
        inference.append(time_inference(graph, images, args.batch_size))
        statistics.append(time_statistics(graph, tensors, images, args.batch_size))
        reference.append(time_reference(graph, tensors, images, args.batch_size))
    steady_inference, steady_statistics, steady_median = steady_state(graph, tensors, images, args.batch_size, args.repeats)
    print(f"{len(images)} images, batch {args.batch_size}, {len(tensors)} tensors observed, best of {args.repeats}")
    for label, base, measured in (("end to end  ", min(inference), min(statistics)),
                                  ("steady state", steady_inference, steady_statistics)):
        print(f"{label}: float inference {base:6.3f} s ({1000 * base / len(images):.2f} ms/image), "
              f"statistics {measured:6.3f} s ({1000 * measured / len(images):.2f} ms/image), "
              f"ratio {measured / base:.2f} (budget {BUDGET})")
    print(f"steady state, median of the {args.repeats} back-to-back ratios: {steady_median:.2f}")
    print(f"in-graph reference path, end to end: {min(reference):6.3f} s, ratio {min(reference) / min(inference):.2f}")
    checked = images[: 4 * args.batch_size]
    same = identical(collect_statistics(graph, tensors, checked, args.batch_size, 2048, "bench", lambda done, total: None),
                     in_graph_statistics(graph, tensors, checked, args.batch_size, 2048))
    print(f"statistics of {len(checked)} images identical to the reference path's (min, max, absmax, count, every bin): {'yes' if same else 'NO'}")
    return 0 if same and steady_median <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
