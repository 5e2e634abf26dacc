"""What every picture shares: a bare Figure on the Agg canvas, saved as a PNG."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def new_figure(width: float, height: float, constrained: bool = True) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained" if constrained else None)
    FigureCanvasAgg(figure)
    return figure


def save(figure: Figure, path: str | Path, dpi: int) -> Path:
    """The PNG, with what its axes say (titles, axis labels) in its text chunks: a reader, a search
    or a test can tell what a picture shows without looking at it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi, metadata={"Title": figure.get_suptitle() or "", "Description": json.dumps(axes_text(figure))})
    return path


def axes_text(figure: Figure) -> list[dict[str, str]]:
    """Each visible axes' title and axis labels."""
    return [{"title": axes.get_title(), "x": axes.get_xlabel(), "y": axes.get_ylabel()} for axes in figure.axes if axes.get_visible()]


def wrapped_title(title: str, width_inches: float, fontsize: float) -> str:
    """`title` broken into lines that fit a figure `width_inches` wide at `fontsize` points (a long title was cut
    at both ends): about 0.6 em a character, on the 80% of the width a title centred over the axes can use."""
    per_line = max(20, int(0.8 * width_inches * 72 / (0.6 * fontsize)))
    return "\n".join(textwrap.fill(line, per_line) for line in title.splitlines())
