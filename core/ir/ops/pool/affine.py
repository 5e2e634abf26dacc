"""TFLite's MEAN over the image (reference_ops::QuantizedMeanOrSum): its requantization with 1 / count folded in."""

from __future__ import annotations


def mean_requantization(count: int, multiplier: int, shift: int) -> tuple[int, int]:
    """(multiplier, shift) of MEAN with 1 / count folded in: the multiplier shifted left by
    h = min(floor(log2(count)), 32, 31 + shift) and divided by count (both non-negative: C's division),
    the shift less h."""
    headroom = min(count.bit_length() - 1, 32, 31 + shift)
    return (int(multiplier) << headroom) // count, shift - headroom
