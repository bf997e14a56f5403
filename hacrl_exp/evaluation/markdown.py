"""Markdown text for the CLIs, the rehearsal and the reports: the one table helper (`markdown_table`), its cells, and
one-line shortening. Markdown, so the output pastes into docs."""

from __future__ import annotations

from collections.abc import Sequence


def cell(value: object) -> str:
    """Floats with 3 decimals, everything else as str; '|' escaped so a cell cannot break the table."""
    text = f"{value:.3f}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table with a header row."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def shorten(text: str | None, width: int = 80) -> str:
    """One line of at most `width` characters ('…' marks a cut)."""
    flat = " ".join(str(text).split()) if text is not None else "None"
    return flat if len(flat) <= width else flat[: width - 1] + "…"
