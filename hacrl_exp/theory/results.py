"""Result records of the theory checks and their rendering as `rich` tables.

A check returns a `CheckResult`: plain strings and floats, no rich objects, so tests can read the
numbers and `render` alone decides how they look.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class Identity:
    """One asserted statement: what was measured, what it should be, and whether it holds."""

    name: str
    measured: float
    target: str
    passed: bool

    @classmethod
    def close(cls, name: str, measured: float, expected: float, tol: float) -> Identity:
        """Holds when |measured − expected| ≤ tol (NaN never holds)."""
        ok = math.isfinite(measured) and abs(measured - expected) <= tol
        return cls(name, measured, f"{expected:.6g} ± {tol:.0e}", ok)

    @classmethod
    def above(cls, name: str, measured: float, bound: float) -> Identity:
        """Holds when measured > bound."""
        return cls(name, measured, f"> {bound:.6g}", math.isfinite(measured) and measured > bound)

    @classmethod
    def below(cls, name: str, measured: float, bound: float) -> Identity:
        """Holds when measured < bound."""
        return cls(name, measured, f"< {bound:.6g}", math.isfinite(measured) and measured < bound)


@dataclass(frozen=True)
class DataTable:
    """A table of already formatted cells; the first column is a row label."""

    columns: list[str]
    rows: list[list[str]]
    title: str = ""


@dataclass
class CheckResult:
    """Everything one check reports: a heading, the claim in one sentence, its tables and its identities."""

    title: str
    claim: str
    tables: list[DataTable]
    identities: list[Identity]
    notes: list[str] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)
    """Key numbers by name, for tests and for other tools; the table shows the same numbers."""

    @property
    def passed(self) -> bool:
        return all(i.passed for i in self.identities)


def fmt(x: float, digits: int = 6) -> str:
    """Signed fixed-point, so columns of biases line up; a value that rounds to zero prints as +0."""
    return f"{round(x, digits) + 0.0:+.{digits}f}"  # + 0.0 turns −0.0 into 0.0


def fmt_pm(mean: float, se: float, digits: int = 5) -> str:
    """mean ± standard error."""
    return f"{fmt(mean, digits)} ± {se:.{digits}f}"


VERDICT_STYLE = {"PASS": "bold green", "FAIL": "bold red"}


def _rich_table(data: DataTable) -> Table:
    table = Table(title=Text(data.title) if data.title else None)
    for i, name in enumerate(data.columns):
        table.add_column(Text(name), justify="left" if i == 0 else "right")
    for row in data.rows:
        # Text, not markup strings: cells like "E[w]" must print literally
        table.add_row(*(Text(cell, style=VERDICT_STYLE.get(cell, "")) for cell in row))
    return table


def render(console: Console, result: CheckResult) -> None:
    """Print a heading, the claim, the data tables, the notes, and one PASS/FAIL row per identity."""
    console.rule(Text(result.title, style="bold"))
    console.print(Text(result.claim))
    for data in result.tables:
        console.print(_rich_table(data))
    for note in result.notes:
        console.print(Text(f"• {note}", style="dim"))
    identities = DataTable(
        ["identity", "measured", "target", "verdict"],
        [[i.name, f"{i.measured:.6g}", i.target, "PASS" if i.passed else "FAIL"] for i in result.identities],
        title="identities",
    )
    console.print(_rich_table(identities))
    console.print()


def render_summary(console: Console, results: list[CheckResult]) -> None:
    """One closing line: how many identities hold, and which checks failed."""
    total = sum(len(r.identities) for r in results)
    failed = [(r.title, i.name) for r in results for i in r.identities if not i.passed]
    console.rule(Text("summary", style="bold"))
    if not failed:
        console.print(f"[bold green]PASS[/]: all {total} identities hold across {len(results)} checks.")
        return
    console.print(f"[bold red]FAIL[/]: {len(failed)} of {total} identities do not hold:")
    for title, name in failed:
        console.print(Text(f"  {title}: {name}"))
