"""What the accuracy benchmarks share: their result as a markdown table, printed and written."""

from __future__ import annotations

from pathlib import Path


def markdown_table(columns: tuple[str, ...], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(cells) + " |" for cells in rows])


def publish(columns: tuple[str, ...], rows: list[list[str]], path: Path) -> None:
    """Print the table and write it to `path` (its directory made if needed)."""
    table = markdown_table(columns, rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(table + "\n")
    print(table)
