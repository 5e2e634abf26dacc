"""kl: TensorRT's entropy calibration (seed 002, GTC 2017), vectorized over all candidates.

For each candidate i in [L, N) (L = num_quant_levels = 128, N = num_bins = 2048):
  P = bins[0:i], with the outliers sum(bins[i:]) added to P[i-1];
  Q = bins[0:i] (without the outliers, as in the seed) summed into L groups, then expanded
      back to i bins: each bin of a group where P is nonzero gets group_sum / (number of
      nonzero P bins in the group), the others 0 (the seed's [1,0,2,3,5,3,1,7] -> [2,0,2,2,4,4,4,4]);
  divergence[i] = KL(P / sum P || Q / sum Q);
and T = (m + 0.5) * bin_width for the m of least divergence (the seed's formula: the centre of
bin m, half a bin beyond the edge m * bin_width of P's window; MXNet uses the edge).
The method searches the histogram with its zero spike removed (`without_zero_spike`): the
one step beyond the seed's pseudo-code, taken from NVIDIA's own calibrator; the search
itself (and kl_reference.py, its loop transcription) sees exactly the histogram it is given.

Conventions (kl_reference.py follows them literally; the tests hold the two together):
- Groups: num_merged_bins = i // L bins each; the last group takes the remainder, so it has
  between i // L and i // L + L - 1 bins (MXNet's `_get_optimal_threshold`, the usual
  TensorRT re-implementation; ncnn splits into fractional groups instead).
- "Nonzero" is P's support (MXNet): the clipped outliers make P[i-1] nonzero even if
  bins[i-1] is empty, and Q may put mass where P does.
- Terms with P = 0 contribute 0. Where P > 0 and Q = 0 (only possible when the whole last
  group of bins[0:i] is empty but outliers exist) the divergence is +inf: no epsilon, so the
  result does not depend on a smoothing constant (MXNet and ncnn add 1e-4 to empty bins).
  If Q is empty altogether (bins[0:i] all zero) the divergence is +inf as well.
- Ties: the smallest i whose divergence is within rounding (relative 1e-9, absolute 1e-12)
  of the least one wins; if every candidate is infinite, i = L. The tolerance makes the pick
  independent of float summation order, so the loop reference picks the same bin.

How it is fast: with p = P / S (S = total count) and q = Q / C_i (C_i = sum bins[0:i]),
  KL_i = (1/S) * sum_k P_k log(P_k / Q_k) + log(C_i / S),
and sum_k P_k log(P_k / Q_k) splits by group into sum_{k in group} P_k log(P_k n_j / G_j).
The first L - 1 groups depend on i only through num_merged_bins = i // L (at most 15 values for
2048 bins), so they are summed once per group size; the last group of the candidates sharing a
group size starts at the same bin, so running sums from that bin give all of them at once.
Sums run over a few hundred bins at most (no difference of large cumulative sums), so the
divergences match the loop's to ~1e-14 on realistic histograms (the tests allow 1e-10, for
fuzzed ones whose counts span 15 orders of magnitude). About 0.7 ms for 2048 bins.
"""

from __future__ import annotations

import numpy as np

from ..histogram import TensorStatistics
from .base import CalibrationSettings, Setting, ThresholdMethod, register_method, require_observed

TIE_RTOL = 1e-9
TIE_ATOL = 1e-12


def _p_log_p(masses: np.ndarray) -> np.ndarray:
    """P log P element-wise, 0 where P = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(masses > 0, masses * np.log(np.where(masses > 0, masses, 1.0)), 0.0)


def _full_groups_term(counts: np.ndarray, num_levels: int, merged: int) -> float:
    """sum P log(P n / G) over the first num_levels - 1 groups of `merged` bins (P = counts
    there; n = nonzero bins of the group, G = its sum), element by element."""
    groups = counts[: (num_levels - 1) * merged].reshape(num_levels - 1, merged)
    group_sums = groups.sum(axis=1, keepdims=True)
    nonzero = np.count_nonzero(groups, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(groups > 0, groups * nonzero / group_sums, 1.0)
    return float(np.sum(groups * np.log(ratio)))


def _last_group_terms(counts: np.ndarray, num_levels: int, merged: int,
                      candidates: np.ndarray, outliers: np.ndarray) -> np.ndarray:
    """sum P log(P n / G) over the last group, bins[(L-1) * merged : i], of each candidate i
    (all with this `merged`), P[i-1] including the outliers; +inf where P > 0 and G = 0.

    The candidates of one group size share the group's start, so running sums over the few
    bins from that start give every candidate's G, n and sum P log P with no cancellation."""
    start = (num_levels - 1) * merged
    window = counts[start: candidates[-1]]
    ends = candidates - start                                   # the group is window[:end]
    group_sums = np.concatenate(([0.0], np.cumsum(window)))[ends]
    before_edge = ends - 1                                      # window[:end-1] is P unchanged
    nonzero_before = np.concatenate(([0], np.cumsum(window > 0)))[before_edge]
    p_log_p_before = np.concatenate(([0.0], np.cumsum(_p_log_p(window))))[before_edge]
    edge = window[before_edge] + outliers                       # P[i-1]
    nonzero = nonzero_before + (edge > 0)
    mass = group_sums + outliers                                # sum of P over the group
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = p_log_p_before + _p_log_p(edge) - mass * np.log(group_sums / np.maximum(nonzero, 1))
    terms = np.where(mass == 0, 0.0, terms)
    return np.where((group_sums == 0) & (mass > 0), np.inf, terms)


def kl_divergences(counts: np.ndarray, num_levels: int = 128) -> np.ndarray:
    """KL(P||Q) for every candidate i in [num_levels, len(counts)), in that order."""
    counts = np.asarray(counts, dtype=np.float64)
    candidates = np.arange(num_levels, counts.size)
    total = counts.sum()
    if candidates.size == 0 or total == 0:
        return np.full(candidates.size, np.inf)
    inside = np.concatenate(([0.0], np.cumsum(counts)))[candidates]                # sum bins[:i]
    outliers = np.concatenate((np.cumsum(counts[::-1])[::-1], [0.0]))[candidates]  # sum bins[i:]

    group_terms = np.empty(candidates.size)
    for merged in range(1, candidates[-1] // num_levels + 1):  # <= 15 sizes for 2048 bins
        block = slice((merged - 1) * num_levels, merged * num_levels)  # candidates i // L == merged
        group_terms[block] = _full_groups_term(counts, num_levels, merged) + _last_group_terms(
            counts, num_levels, merged, candidates[block], outliers[block])

    with np.errstate(divide="ignore", invalid="ignore"):
        divergence = group_terms / total + np.log(inside / total)
    return np.where(np.isinf(group_terms) | (inside == 0), np.inf, divergence)


def select_candidate(divergences: np.ndarray, first_candidate: int) -> int:
    """The candidate i of least divergence, ties (within rounding) to the smallest i."""
    if divergences.size == 0 or not np.isfinite(divergences).any():
        return first_candidate
    least = divergences.min()
    within = divergences <= least + TIE_RTOL * abs(least) + TIE_ATOL
    return first_candidate + int(np.argmax(within))


def without_zero_spike(counts: np.ndarray) -> np.ndarray:
    """The histogram with bin 0 set to bin 1's count.

    After a ReLU, half or more of an activation is exactly 0 (53% on mbv1_cifar10's last
    pointwise conv). Zero is exact at every scale, so it is no quantization error; but at
    small candidates i a group is a single bin, the spike is never spread, and the
    divergence favours them: on that tensor the search picks T = 0.75 of a [0, 6] range,
    clips 13% of the values and takes top-1 from 78% to 19%. NVIDIA's entropy calibrator
    (pytorch-quantization's _compute_amax_entropy) makes the same replacement."""
    flattened = np.array(counts, dtype=np.float64)
    if flattened.size > 1:
        flattened[0] = flattened[1]
    return flattened


def kl_threshold_bin(counts: np.ndarray, num_levels: int = 128) -> int:
    """The chosen bin m (T = (m + 0.5) * bin_width)."""
    return select_candidate(kl_divergences(counts, num_levels), num_levels)


MIN_VALUES_PER_BIN = Setting(
    "kl_min_values_per_bin", 5,
    "calibration values per histogram bin a tensor needs for the entropy search (fewer: minmax)", check="positive")


@register_method
class EntropyKL(ThresholdMethod):
    """Where the entropy argument holds: the activations conv, depthwise conv and dense layers read (seed 003's
    ncnn2table calibrates exactly those), whose int8 values are what the layer multiplies, and whose calibration
    values are enough for a histogram of calib.num_bins bins to stand for a distribution rather than sampling noise:
    at least calib.kl_min_values_per_bin per bin on average, by default 5 (10240 values at 2048 bins), the classical
    rule for a histogram compared with a distribution (a chi-square test's: at least 5 expected values per cell,
    Cochran 1954). TensorRT's calibrator is run on about 500 images (seed 002: "for ImageNet networks, around 500
    calibration images is adequate") and ncnn's on hundreds: even their smallest weight-layer inputs, the 7x7 maps
    of an ImageNet network, give thousands of values per bin. A 1x1 map of 16 channels on two images is 32 values,
    of which the search clipped 62.5% (ssd_mbv2 on two photos, 0.82 dB at the end points).

    Any other tensor keeps its whole range (minmax, the entry says why): a network's outputs, what feeds an add, a
    pool or a softmax only (on ssd_mbv2 KL clipped the class logits to 0.8 dB end-point SQNR), the network input,
    which is the data as given, not a learned distribution with a tail (KL clipped 92% of the digits' pixels, whose
    background sits at the range's end), and a tensor with too few calibration values."""

    name = "kl"
    auto_rank = 4
    summary = "closest int8 distribution in KL divergence (TensorRT, ncnn) on what weight layers read, given enough values; elsewhere minmax"
    scope = "weight_inputs"
    fallback = "minmax"
    settings = (MIN_VALUES_PER_BIN,)

    def does_not_apply(self, stats: TensorStatistics | None, settings: CalibrationSettings) -> str | None:
        needed = settings.option(MIN_VALUES_PER_BIN) * stats.num_bins
        if stats.count < needed:
            return (f"kl: {stats.count} calibration values, fewer than calib.kl_min_values_per_bin="
                    f"{settings.option(MIN_VALUES_PER_BIN)} x {stats.num_bins} bins = {needed} (more calibration images, or minmax)")
        return None

    def threshold(self, stats: TensorStatistics, settings: CalibrationSettings) -> float:
        require_observed(stats, self.name)
        if stats.absmax == 0:
            return 0.0
        if stats.num_bins <= settings.num_quant_levels:
            return float(stats.absmax)  # no candidate: the histogram is no finer than the target
        return (kl_threshold_bin(without_zero_spike(stats.counts), settings.num_quant_levels) + 0.5) * stats.bin_width
