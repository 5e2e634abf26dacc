"""Warnings for the console: one line per kind, with its count and its worst case; the full list belongs
in the stage's report.json. A large network repeats the same warning for dozens of tensors, and sixty
near-identical lines hide the one that differs."""

from __future__ import annotations

import re

NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?!\w)")  # a figure, not the 2 of "log2scale"


def kind_of(message: str) -> str:
    """The message with its numbers taken out: what warnings of one kind share."""
    return NUMBER.sub("#", message)


def _magnitude(message: str) -> float:
    numbers = NUMBER.findall(message)
    return abs(float(numbers[0])) if numbers else 0.0


def summarize(warnings: list[tuple[str, str]], noun: str = "tensors") -> list[str]:
    """(subject, message) pairs -> one line per kind, in order of first appearance: the message itself when
    it is alone, else the count and the case whose first figure is largest (the worst)."""
    kinds: dict[str, list[tuple[str, str]]] = {}
    for subject, message in warnings:
        kinds.setdefault(kind_of(message), []).append((subject, message))
    lines = []
    for cases in kinds.values():
        subject, message = max(cases, key=lambda case: _magnitude(case[1]))
        lines.append(f"{subject}: {message}" if len(cases) == 1 else
                     f"{len(cases)} {noun} alike; the worst, {subject}: {message}")
    return lines
