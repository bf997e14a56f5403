"""Helpers shared by the benchmark scripts: medians, tables, JSON output."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    """The value at rank int(q · n) of the sorted values (the last one for q near 1): a nearest-rank percentile."""
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


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


def finish(name: str, started: float, path: str | Path, payload: dict) -> None:
    """End of a benchmark script: print its wall seconds since `started` (perf_counter) and write the JSON."""
    wall = time.perf_counter() - started
    print(f"\n{name}: {wall:.0f} s wall")
    write_json(path, {**payload, "wall_s": wall})
