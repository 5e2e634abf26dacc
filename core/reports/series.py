"""Per-layer (or per-tensor) series as data: `series/<name>.json` in a stage's artifact, a JSON
list of rows such as {"layer_index": 3, "layer": "conv_3", "sqnr_db": 27.1}. The pipeline
hands them to DVC (`dvc plots show/diff`) and to MLflow (a metric stepped by the index), so
the same numbers the PNGs draw can be compared across runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

SERIES_DIR = "series"


def _value(value: Any) -> Any:
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    value = float(value)
    return value if math.isfinite(value) else None  # JSON has no inf; a chart leaves a gap


def series_rows(index_field: str, name_field: str, columns: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in the order of the first column's keys: {index_field: i, name_field: key, column: value...}."""
    names = list(next(iter(columns.values())))
    return [{index_field: index, name_field: name, **{column: _value(values.get(name)) for column, values in columns.items()}}
            for index, name in enumerate(names)]


def write_series(out_dir: Path, name: str, rows: Iterable[dict[str, Any]]) -> Path:
    path = Path(out_dir) / SERIES_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{key: _value(value) for key, value in row.items()} for row in rows], indent=1) + "\n")
    return path


def read_series(path: Path) -> list[dict[str, Any]]:
    rows = json.loads(Path(path).read_text())
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ValueError(f"{path}: expected a JSON list of objects (one per layer)")
    return rows
