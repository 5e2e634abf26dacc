"""Time the fast KL threshold search against the loop reference, and check they agree.

    .venv/bin/python bench/bench_kl.py                       # a few hundred synthetic histograms
    .venv/bin/python bench/bench_kl.py --histograms DIR      # every *.npy count array under DIR

Synthetic histograms come from random activations of several shapes and distributions
(half-normal, ReLU6 with spikes at 0 and 6, exponential, sparse, Gaussian with a far outlier),
streamed in batches through TensorStatistics as calibration does. Prints per-tensor
milliseconds of each implementation, the speed ratio, and whether both pick the same bin on
every histogram; exits 1 if they do not, or if the fast one exceeds --budget-ms on average.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.quantize.calibration import TensorStatistics  # noqa: E402
from core.quantize.calibration.methods.kl import kl_threshold_bin, without_zero_spike  # noqa: E402
from core.quantize.calibration.methods.kl_reference import kl_threshold_bin_reference  # noqa: E402

SHAPES = [(4, 16, 16, 32), (8, 8, 8, 64), (16, 32, 32, 8), (32, 1000), (2, 64, 64, 16)]


def _activation(family: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    scale = rng.uniform(0.05, 20.0)
    if family == "half_normal":
        return scale * rng.standard_normal(shape)
    if family == "relu6":
        return np.clip(rng.normal(rng.uniform(-1, 2), scale, shape), 0.0, 6.0)
    if family == "exponential":
        return rng.exponential(scale, shape)
    if family == "sparse":
        return scale * rng.standard_normal(shape) * (rng.random(shape) < rng.uniform(0.001, 0.05))
    if family == "outlier":
        values = scale * rng.standard_normal(shape)
        values.flat[rng.integers(values.size)] = scale * rng.uniform(20, 200)
        return values
    raise ValueError(family)


FAMILIES = ["half_normal", "relu6", "exponential", "sparse", "outlier"]


def synthetic_histograms(count: int, seed: int, num_bins: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    histograms = []
    for index in range(count):
        family = FAMILIES[index % len(FAMILIES)]
        shape = SHAPES[rng.integers(len(SHAPES))]
        stats = TensorStatistics(num_bins)
        for _ in range(rng.integers(1, 5)):  # a few batches, so some histograms are re-binned
            stats.update(_activation(family, shape, rng))
        histograms.append((f"{family}#{index}", stats.counts))
    return histograms


def stored_histograms(directory: Path) -> list[tuple[str, np.ndarray]]:
    paths = sorted(directory.rglob("*.npy"))
    if not paths:
        raise SystemExit(f"no .npy files under {directory}")
    return [(str(path.relative_to(directory)), np.load(path).astype(np.float64).ravel()) for path in paths]


def _timed(function, counts: np.ndarray, num_levels: int, repeats: int) -> tuple[int, float]:
    """(result, best milliseconds of `repeats` runs)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        result = function(counts, num_levels)
        best = min(best, time.perf_counter() - start)
    return result, 1e3 * best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--histograms", type=Path,
                        help="directory of .npy count arrays (searched recursively)")
    parser.add_argument("--count", type=int, default=300, help="synthetic histograms (default 300)")
    parser.add_argument("--num-bins", type=int, default=2048)
    parser.add_argument("--num-levels", type=int, default=128, help="quantization levels (128 for int8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="fast timings take the best of this many runs")
    parser.add_argument("--budget-ms", type=float, default=10.0, help="fail if the fast mean exceeds this")
    args = parser.parse_args(argv)

    if args.histograms:
        histograms = stored_histograms(args.histograms)
        source = str(args.histograms)
    else:
        histograms = synthetic_histograms(args.count, args.seed, args.num_bins)
        source = f"{args.count} synthetic ({', '.join(FAMILIES)}), seed {args.seed}"
    print(f"{len(histograms)} histograms from {source}; {args.num_levels} levels")

    fast_ms, reference_ms, disagreements = [], [], []
    for name, raw_counts in histograms:
        counts = without_zero_spike(raw_counts)  # what the kl method searches
        fast_bin, fast_time = _timed(kl_threshold_bin, counts, args.num_levels, args.repeats)
        reference_bin, reference_time = _timed(kl_threshold_bin_reference, counts, args.num_levels, 1)
        fast_ms.append(fast_time)
        reference_ms.append(reference_time)
        if fast_bin != reference_bin:
            disagreements.append((name, fast_bin, reference_bin))

    def summary(times):
        return (f"mean {statistics.fmean(times):8.3f}  median {statistics.median(times):8.3f}  "
                f"max {max(times):8.3f} ms/tensor")

    print(f"fast      {summary(fast_ms)}")
    print(f"reference {summary(reference_ms)}")
    speed_up = statistics.fmean(reference_ms) / statistics.fmean(fast_ms)
    print(f"speed-up  {speed_up:.1f}x (mean reference / mean fast)")
    agree = len(histograms) - len(disagreements)
    print(f"same bin  {agree}/{len(histograms)}")
    for name, fast_bin, reference_bin in disagreements[:20]:
        print(f"  DIFFERENT {name}: fast bin {fast_bin}, reference bin {reference_bin}")
    failed = bool(disagreements)
    if statistics.fmean(fast_ms) > args.budget_ms:
        print(f"fast KL mean {statistics.fmean(fast_ms):.3f} ms exceeds the {args.budget_ms} ms budget")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
