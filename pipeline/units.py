"""What a metric's name says of its unit, and so how it is shown: `figure` as a person reads it on the console and in
summaries, `rounded` to the precision it means where MLflow shows it (its run page and compare view print every digit
they are given; metrics.json keeps the full values)."""

from __future__ import annotations

import re

from core.limits import human_bytes

# metrics that are fractions (shown as percentages) and decibels, by the words their names hold
FRACTION_METRIC = re.compile(r"(^|[._])(top1|bitexact|fraction|share|agreement|accuracy)")
DECIBEL_METRIC = re.compile(r"(^|[._])[a-z_]*_db($|_)")
FRACTION_DECIMALS = 4  # 0.01%: the resolution of a top-1 on 10 000 images
DECIBEL_DECIMALS = 2
SIGNIFICANT_DIGITS = 4


def figure(name: str, value: float) -> str:
    """A metric as a person reads it: sizes in binary units (`799.0 KiB`), fractions as percentages (`98.61%`),
    decibels with their unit (`27.77 dB`), counts as integers, large figures in millions, the rest to four digits."""
    if name.endswith("_bytes"):
        return human_bytes(int(value))
    if FRACTION_METRIC.search(name) and 0.0 <= value <= 1.0:
        return f"{value * 100:.4g}%"
    if DECIBEL_METRIC.search(name):
        return f"{value:.2f} dB"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.4g} M"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4g}"


def rounded(name: str, value: float) -> float:
    """`value` to the precision its unit means: decibels to 0.01 dB, fractions to 0.01% (but a fraction short of 1 or
    above 0 never rounds to exactly 1 or 0: 0.99997 agreement is not bit-exact), integers as they are, the rest to four
    significant digits."""
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")) or value.is_integer():
        return value
    if DECIBEL_METRIC.search(name):
        return round(value, DECIBEL_DECIMALS)
    if FRACTION_METRIC.search(name) and 0.0 <= value <= 1.0:
        coarse = round(value, FRACTION_DECIMALS)
        if coarse not in (0.0, 1.0):
            return coarse
        finer = float(f"{value:.6g}")  # 0.99997 rounds to 1: six digits say it is not
        return finer if finer not in (0.0, 1.0) else value
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
