"""What every picture shares: a bare Figure on the Agg canvas, saved as a PNG."""

from __future__ import annotations

import json
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
