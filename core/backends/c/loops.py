"""C loop nests over a tensor's shape, for emitters that walk every index of it: one loop per axis, each array read at
its own strides."""

from __future__ import annotations


def row_major_strides(shape: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return strides[::-1]


def nested_loops(shape: tuple[int, ...], offsets: list[list[int]], body: str) -> str:
    """C loops over every index of `shape` (i0, i1, ...), `body` innermost with `{k}` replaced by the offset of array k:
    the sum over axes of index times that array's stride along it."""
    lines = [f"{'    ' * (axis + 1)}for (i{axis} = 0; i{axis} < {size}; i{axis}++) {{" for axis, size in enumerate(shape)]
    expressions = [" + ".join(f"i{axis} * {stride}" for axis, stride in enumerate(strides) if stride) or "0" for strides in offsets]
    inner = "    " * (len(shape) + 1) + body.format(*expressions)
    closing = [f"{'    ' * (axis + 1)}}}" for axis in reversed(range(len(shape)))]
    return "\n".join([f"    long {', '.join(f'i{axis}' for axis in range(len(shape)))};", *lines, inner, *closing])
