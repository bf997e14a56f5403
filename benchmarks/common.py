"""Helpers shared by the benchmark scripts: medians, tables, JSON output."""

from __future__ import annotations

import json
import statistics
from pathlib import Path


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def print_table(headers: list[str], rows: list[list], title: str = "") -> None:
    """A plain Markdown table (pastes straight into docs/performance.md)."""
    if title:
        print(f"\n### {title}\n")
    cells = [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    for row in cells:
        print("| " + " | ".join(row) + " |")


def write_json(path: str | Path, payload: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=1))
    print(f"\nwrote {path}")
