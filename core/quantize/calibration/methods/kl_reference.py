"""The seed-002 pseudo-code transcribed step by step, one candidate i at a time, for clarity,
not speed (each step a line of numpy, ~35 us per candidate, ~70 ms per 2048-bin histogram):
the yardstick the fast `kl.kl_divergences` is tested and benchmarked against. Same conventions
(see kl.py): groups of i // L bins with the remainder in the last, Q nonzero where P is, +inf
where P > 0 and Q = 0, ties to the smallest i. Not a registered method.

    For i in range(128, 2048):
        reference_distribution_P = [bin[0], ..., bin[i-1]]
        outliers_count = sum(bin[i], bin[i+1], ..., bin[2047])
        reference_distribution_P[i-1] += outliers_count
        P /= sum(P)
        candidate_distribution_Q = quantize [bin[0], ..., bin[i-1]] into 128 levels
        expand candidate_distribution_Q to 'i' bins
        Q /= sum(Q)
        divergence[i] = KL_divergence(reference_distribution_P, candidate_distribution_Q)
    m = argmin(divergence); threshold = (m + 0.5) * bin_width
"""

from __future__ import annotations

import math

import numpy as np

from .kl import select_candidate


def quantize(bins: np.ndarray, num_levels: int) -> np.ndarray:
    """Sum `bins` into num_levels groups of len(bins) // num_levels; the last takes the rest."""
    merged = len(bins) // num_levels
    group_starts = np.arange(num_levels) * merged
    return np.add.reduceat(bins, group_starts)


def expand(quantized: np.ndarray, support: np.ndarray) -> np.ndarray:
    """Spread each group's sum evenly over the group's bins in `support`; other bins get 0."""
    num_levels = len(quantized)
    merged = len(support) // num_levels
    group_of_bin = np.minimum(np.arange(len(support)) // merged, num_levels - 1)
    nonzero_per_group = np.bincount(group_of_bin, weights=support, minlength=num_levels)
    share = np.divide(quantized, nonzero_per_group,
                      out=np.zeros(num_levels), where=nonzero_per_group > 0)
    return np.where(support, share[group_of_bin], 0.0)


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """sum p log(p / q); terms with p = 0 are 0; +inf if some p > 0 has q = 0."""
    counted = p > 0
    if np.any(q[counted] == 0):
        return math.inf
    return float(np.sum(p[counted] * np.log(p[counted] / q[counted])))


def divergence_at(bins: np.ndarray, i: int, num_levels: int) -> float:
    reference_p = bins[:i].copy()
    reference_p[i - 1] += bins[i:].sum()
    candidate_q = expand(quantize(bins[:i], num_levels), support=reference_p != 0)
    if candidate_q.sum() == 0:
        return math.inf
    return kl_divergence(reference_p / reference_p.sum(), candidate_q / candidate_q.sum())


def kl_divergences_reference(counts: np.ndarray, num_levels: int = 128) -> np.ndarray:
    bins = np.asarray(counts, dtype=np.float64)
    return np.array([divergence_at(bins, i, num_levels) for i in range(num_levels, len(bins))])


def kl_threshold_bin_reference(counts: np.ndarray, num_levels: int = 128) -> int:
    return select_candidate(kl_divergences_reference(counts, num_levels), num_levels)
