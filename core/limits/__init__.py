"""The memory budget (config `limits.memory_mb`): what a run may allocate, checked against
declared sizes (a file's length, a constant's shape, an input shape times a batch, the
activations of one image) before anything is allocated. The bottom of core: imports nothing
from it.

A refusal names what asked, the figure, and the key that would allow it; a batch is made
smaller rather than refused when one image fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Iterable

import numpy as np

BUDGET_KEY = "limits.memory_mb"
MEBIBYTE = 1 << 20


class BudgetError(ValueError):
    """A declared size over the memory budget."""


def human_bytes(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def elements(shape: Iterable[int | None]) -> int:
    """Elements of a shape; an unknown or dynamic dimension counts as 1."""
    return prod(max(1, int(dim)) if dim is not None else 1 for dim in shape)


@dataclass(frozen=True)
class MemoryBudget:
    megabytes: int

    @property
    def bytes(self) -> int:
        return int(self.megabytes) * MEBIBYTE

    def check(self, what: str, needed: int, lower: str = "") -> None:
        """Refuse `what` when it needs more than the budget; `lower` names a key that asks for less."""
        if needed > self.bytes:
            instead = f"lower {lower} or " if lower else ""
            raise BudgetError(f"{what} needs {human_bytes(needed)}, over the memory budget {BUDGET_KEY}={self.megabytes} "
                              f"({human_bytes(self.bytes)}); {instead}raise {BUDGET_KEY} if this machine has the memory")

    def batch_size(self, requested: int, per_image: int, what: str) -> int:
        """The largest batch up to `requested` whose images fit the budget; refused when one does not."""
        self.check(f"one image of {what}", per_image)
        return max(1, min(int(requested), self.bytes // max(1, per_image)))


def check_activations(budget: MemoryBudget, sizes: dict[str, int], origin: str) -> int:
    """One image's activations (`sizes`: tensor -> bytes) must fit; their sum, for sizing batches."""
    total = sum(sizes.values())
    largest = max(sizes, key=sizes.__getitem__) if sizes else "none"
    budget.check(f"{origin}: one image through the graph (largest tensor {largest}, {human_bytes(sizes.get(largest, 0))})",
                 total, lower="the model's input size")
    return total


def npy_header(stream, origin: str) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) an .npy stream declares, read from its header alone: what loading it would allocate is
    checked before it is (a few bytes can declare terabytes). A ValueError naming `origin` when it is no .npy."""
    try:
        version = np.lib.format.read_magic(stream)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(stream)
    except (ValueError, OSError, SyntaxError, EOFError) as error:
        raise ValueError(f"{origin}: not a readable .npy array ({error})") from None
    return tuple(int(dim) for dim in shape), dtype
