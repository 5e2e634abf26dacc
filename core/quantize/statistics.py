"""Calibration statistics beside the TensorFlow graph: extrema and histograms of every observed tensor.

Each batch is one graph execution fetching every observed tensor (measured on mbv1_cifar10:
fetching all 30 costs 3-10% over the inference alone; TensorFlow's own reductions next to
them cost 25-35%, its histogram ops 150-250%: abs, scale, cast, clip and bincount are five
passes over each tensor). Here a tensor's max and min are one compiled pass over its bits
(`_extreme_keys`: integer max/min vectorize, 0.11 ns per element against 0.24 for numpy's
two float passes per image) and its histogram of |x| over [0, the batch's absmax] another
(`magnitude_histogram`, numba), on a thread pool while TensorFlow computes the next batch,
one task per tensor. The arithmetic is the graph's own float32 one (bin =
trunc(|x| * float32(num_bins / absmax)), clipped to the last bin), so the numbers are those
the in-graph reduction gave (tests/test_statistics.py compares the two on real models).

`TensorStatistics.merge` folds each batch in, in batch order, on a thread of its own (its
re-binning, compiled, is off the graph's path).

What limits it: the histogram's scattered increments, about 0.6 ns per element on one core
(mbv1_cifar10 observes 0.87 M elements per 128x128 image; 2 or 8 interleaved counter sets
measured slower than 4), and the extra memory of a batch in flight (a calibrating stage
budgets two batches of activations).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from core.frontend.graph import Graph
from core.frontend.tf_runtime import GraphRunner
from core.quantize.calibration.build import CalibrationError
from core.quantize.calibration.histogram import TensorStatistics

SUB_HISTOGRAMS = 4  # interleaved counters: consecutive equal bins (a ReLU's zeros) do not wait on each other


@numba.njit(cache=True, nogil=True)
def _count_bins(values, scale, num_bins):  # pragma: no cover  (compiled; tested through magnitude_histogram)
    counters = np.zeros(SUB_HISTOGRAMS * num_bins, np.uint32)
    last, stride = np.uint32(num_bins - 1), np.uint32(num_bins)
    flat = values.ravel()
    whole = flat.size - flat.size % SUB_HISTOGRAMS
    for start in range(0, whole, SUB_HISTOGRAMS):  # unsigned indices: no negative-index wraparound checks
        for lane in range(SUB_HISTOGRAMS):
            counters[min(np.uint32(abs(flat[start + lane]) * scale), last) + np.uint32(lane) * stride] += np.uint32(1)
    for position in range(whole, flat.size):
        counters[min(np.uint32(abs(flat[position]) * scale), last)] += np.uint32(1)
    counts = np.zeros(num_bins, np.int64)
    for lane in range(SUB_HISTOGRAMS):
        counts += counters[lane * num_bins : (lane + 1) * num_bins]
    return counts


def magnitude_histogram(values: np.ndarray, absmax: float, num_bins: int) -> np.ndarray:
    """Counts (int64) of |values| (float32, finite, |x| <= absmax) in `num_bins` bins over [0, absmax],
    binned as the graph did: trunc(|x| * float32(num_bins / max(absmax, the smallest normal float32)))."""
    if values.size >= 2**32:
        raise ValueError(f"{values.size} values in one histogram: more than its uint32 counters hold")
    with np.errstate(over="ignore"):  # handled: an infinite scale means every value is ~0
        scale = np.float32(num_bins) / np.maximum(np.float32(absmax), np.finfo(np.float32).tiny)
    if not np.isfinite(scale):  # absmax so small (< 2^-115) that the scale overflows: every value is ~0
        counts = np.zeros(num_bins, np.int64)
        counts[0] = values.size
        return counts
    return _count_bins(np.ascontiguousarray(values, dtype=np.float32), scale, num_bins)


SIGN_CLEARED = np.int32(0x7FFFFFFF)


@numba.njit(cache=True, nogil=True)
def _extreme_keys(bits):  # pragma: no cover  (compiled; tested through observe_tensor)
    """The largest and smallest of float32 values given as their int32 bits, in one pass: each
    value's key (its bits, the magnitude bits flipped when negative) orders as the floats do,
    -0.0 just below +0.0 and a NaN beyond the infinity of its sign, and integer max/min
    vectorize where float ones (NaN-ordered) do not."""
    highest, lowest = np.int32(-2147483648), np.int32(2147483647)
    for position in range(bits.size):
        word = bits[position]
        key = word ^ ((word >> 31) & SIGN_CLEARED)
        highest, lowest = max(highest, key), min(lowest, key)
    return highest, lowest


def _float_of_key(key) -> float:
    """The float32 value a key of `_extreme_keys` stands for (the mapping is its own inverse)."""
    word = np.int32(key)
    return float(np.array([word ^ ((word >> 31) & SIGN_CLEARED)], np.int32).view(np.float32)[0])


@dataclass
class TensorObservation:
    """One tensor in one batch: its extrema and, when they are finite, its histogram; else the first
    image (in the batch) holding NaN/Inf."""

    highest: float
    lowest: float
    images: int
    size: int
    counts: np.ndarray | None
    bad_image: int | None = None


def observe_tensor(values: np.ndarray, num_bins: int) -> TensorObservation:
    """The batch's max and min (one compiled pass), then the histogram of |x| over [0, the batch's
    absmax] (a NaN or an infinity is one of the extrema: the batch is refused, naming its image)."""
    values = np.ascontiguousarray(values, dtype=np.float32).reshape(len(values), -1)
    highest, lowest = (_float_of_key(key) for key in _extreme_keys(values.reshape(-1).view(np.int32)))
    absmax = max(highest, -lowest)  # negation is exact: the graph's max(|x|)
    if not (np.isfinite(highest) and np.isfinite(lowest)):
        bad_image = int(np.argmin(np.isfinite(values).all(axis=1)))
        return TensorObservation(highest, lowest, len(values), values.size, None, bad_image)
    return TensorObservation(highest, lowest, len(values), values.size, magnitude_histogram(values, absmax, num_bins))


class StatisticsCollector:
    """Observes `tensors` of `graph` batch by batch: one graph execution per batch, fetching the
    tensors (TensorFlow hands them over without copying), their extrema and histograms computed on
    `workers` threads while the graph runs the next batch; memory constant in the image count (two
    batches of the observed tensors at most)."""

    def __init__(self, graph: Graph, tensors: list[str], num_bins: int, source: str, workers: int | None = None):
        self.tensors, self.num_bins, self.source = tensors, num_bins, source
        self.stats = {tensor: TensorStatistics(num_bins) for tensor in tensors}
        self.runner = GraphRunner(graph)
        self.pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1, thread_name_prefix="statistics")
        # one thread folds the batches in, in order (re-binning is 13% of the collection's time on mbv1_cifar10:
        # off the graph's path, it overlaps the next batch)
        self.merger = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statistics-merge")
        self.seen = 0  # images merged: the merger's, for naming a refused image

    def observe(self, images: np.ndarray, batch_size: int, progress=None) -> None:
        """Fold `images` in, `batch_size` per graph execution; `progress(observed, total)` after each batch."""
        observing: list[list[Future]] = []
        merges: list[Future] = []
        total, observed = self.seen + len(images), self.seen
        for values in self.runner.batches(self.tensors, images, batch_size):
            observing.append([self.pool.submit(observe_tensor, tensor_values, self.num_bins) for tensor_values in values])
            if len(observing) == 2:  # the graph has computed the next batch: the previous one's arrays go once observed
                observed = self._hand_over(observing.pop(0), merges, observed, total, progress)
        while observing:
            observed = self._hand_over(observing.pop(0), merges, observed, total, progress)
        for merge in merges:
            merge.result()

    def _hand_over(self, futures: list[Future], merges: list[Future], observed: int, total: int, progress) -> int:
        """A batch's observations to the merger (its arrays are no longer held); a merge that refused its batch
        (NaN) raises here, a batch or two later. Returns the images observed so far."""
        batch = [future.result() for future in futures]
        merges.append(self.merger.submit(self._merge, batch))
        while merges and merges[0].done():
            merges.pop(0).result()
        observed += batch[0].images if batch else 0
        if progress is not None:
            progress(observed, total)
        return observed

    def _merge(self, batch: list[TensorObservation]) -> None:
        for tensor, observed in zip(self.tensors, batch):
            if observed.counts is None:
                raise CalibrationError(
                    f"calibration image {self.seen + observed.bad_image} of {self.source}: tensor {tensor} has "
                    f"NaN/Inf values; check the data and the model's preprocessing"
                )
            scalars = {"num_bins": self.num_bins, "count": observed.size, "min": observed.lowest,
                       "max": observed.highest, "absmax": max(observed.highest, -observed.lowest)}
            self.stats[tensor].merge(TensorStatistics.from_dict(scalars, observed.counts))
        self.seen += batch[0].images if batch else 0

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.merger.shutdown(wait=True, cancel_futures=True)
        self.runner.close()


def collect_statistics(graph: Graph, tensors: list[str], images: np.ndarray, batch_size: int, num_bins: int,
                       source: str, progress) -> dict[str, TensorStatistics]:
    if len(images) == 0:
        raise CalibrationError(f"{source}: the calibration data set is empty")
    collector = StatisticsCollector(graph, tensors, num_bins, source)
    try:
        collector.observe(images, batch_size, progress)
    finally:
        collector.close()
    return collector.stats


def in_graph_statistics(graph: Graph, tensors: list[str], images: np.ndarray, batch_size: int, num_bins: int) -> dict[str, TensorStatistics]:
    """The reference path (what calibrate ran until the compiled histogram): every reduction and the
    histogram as TensorFlow ops, per batch, merged in order; 2-4x slower, the same numbers."""

    def build(tf_graph):
        import tensorflow as tf

        fetches = []
        for name in tensors:
            values = tf.cast(tf_graph.get_tensor_by_name(name), tf.float32)
            magnitudes = tf.abs(values)
            per_image = tf.reduce_max(tf.reshape(magnitudes, [tf.shape(values)[0], -1]), axis=1)
            absmax = tf.reduce_max(per_image)
            bins = tf.cast(magnitudes * (num_bins / tf.maximum(absmax, np.finfo(np.float32).tiny)), tf.int32)
            bins = tf.clip_by_value(tf.reshape(bins, [-1]), 0, num_bins - 1)
            fetches += [absmax, tf.reduce_min(values), tf.reduce_max(values),
                        tf.math.bincount(bins, minlength=num_bins, maxlength=num_bins), tf.size(values)]
        return fetches

    stats = {tensor: TensorStatistics(num_bins) for tensor in tensors}
    with GraphRunner(graph) as runner:
        for values in runner.batches(runner.extend(build), images, batch_size):
            for position, tensor in enumerate(tensors):
                absmax, lowest, highest, counts, size = values[5 * position : 5 * position + 5]
                scalars = {"num_bins": num_bins, "count": int(size), "min": float(lowest), "max": float(highest), "absmax": float(absmax)}
                stats[tensor].merge(TensorStatistics.from_dict(scalars, counts))
    return stats


def channel_statistics(graph: Graph, tensors: list[str], images: np.ndarray, batch_size: int) -> dict[str, dict[str, np.ndarray]]:
    """Per channel (the last axis) of each tensor over all images: "max", "absmax", "mean" and
    "mean_square", reduced in the graph so only [C]-sized results leave it. Cross-layer equalization
    reads the maxima of the pre-activations a ReLU6 clamps; bias correction the means of each weighted
    layer's input; weight_method=mse the mean squares (what each input channel's weight error costs)."""
    tensors = sorted(set(tensors))
    if not tensors:
        return {}

    def build(tf_graph):
        import tensorflow as tf

        fetches = []
        for name in tensors:
            values = tf.cast(tf_graph.get_tensor_by_name(name), tf.float32)
            flat = tf.reshape(values, [-1, tf.shape(values)[-1]])
            fetches += [tf.reduce_max(flat, axis=0), tf.reduce_max(tf.abs(flat), axis=0),
                        tf.reduce_sum(tf.cast(flat, tf.float64), axis=0), tf.reduce_sum(tf.square(tf.cast(flat, tf.float64)), axis=0),
                        tf.shape(flat)[0]]
        return fetches

    maxima: dict[str, np.ndarray] = {}
    absmaxima: dict[str, np.ndarray] = {}
    sums: dict[str, np.ndarray] = {}
    squares: dict[str, np.ndarray] = {}
    counts = dict.fromkeys(tensors, 0)
    with GraphRunner(graph) as runner:
        fetches = runner.extend(build)
        for values in runner.batches(fetches, images, batch_size):
            for position, tensor in enumerate(tensors):
                batch_max, batch_absmax, batch_sum, batch_squares, batch_count = values[5 * position : 5 * position + 5]
                maxima[tensor] = batch_max if tensor not in maxima else np.maximum(maxima[tensor], batch_max)
                absmaxima[tensor] = batch_absmax if tensor not in absmaxima else np.maximum(absmaxima[tensor], batch_absmax)
                sums[tensor] = batch_sum if tensor not in sums else sums[tensor] + batch_sum
                squares[tensor] = batch_squares if tensor not in squares else squares[tensor] + batch_squares
                counts[tensor] += int(batch_count)
    return {tensor: {"max": maxima[tensor].astype(np.float64), "absmax": absmaxima[tensor].astype(np.float64), "mean": sums[tensor] / max(counts[tensor], 1),
                     "mean_square": squares[tensor] / max(counts[tensor], 1)} for tensor in tensors}


def save_moments(moments: dict[str, dict[str, np.ndarray]], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    index = {}
    for number, (tensor, values) in enumerate(sorted(moments.items())):
        index[tensor] = {}
        for name, array in sorted(values.items()):
            index[tensor][name] = f"{number:04d}_{name}.npy"
            np.save(directory / index[tensor][name], np.asarray(array, np.float64), allow_pickle=False)
    (directory / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")


def load_moments(directory: Path) -> dict[str, dict[str, np.ndarray]]:
    index = json.loads((directory / "index.json").read_text())
    return {tensor: {name: np.load(directory / file, allow_pickle=False) for name, file in files.items()}
            for tensor, files in index.items()}
