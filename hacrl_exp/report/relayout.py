"""Lay a published report out again from its own files, without its MLflow store: the opening first, then the rest.

    python -m hacrl_exp.report.relayout reports/paper_table1_tiny_10seeds [more folders]
    python -m hacrl_exp.report.relayout reports/paper_table1_tiny --superseded-by paper_table1_tiny_10seeds \
        --reason "the same grid at 10 seeds"

A report folder holds the numbers of every table (tables/comparisons.csv, accuracy.csv, cost.csv) and its report.md.
From the tables this computes the bottom line and draws the claims block (report/opening.py), as
`python -m hacrl_exp.report` does for a new report; it reads report.md's sections back (layout.split) and writes
report.md and report.html in the layout of report/layout.py. Nothing else is touched: the tables, the other plots and
every section's text stay as they were, so no number changes. Older reports' cost columns (`rollouts_total`,
`tokens_total`) are read under their current names (load.TOTALS).

--superseded-by NAME (a sibling folder holding report.md) records the successor in the folder's superseded.json;
the report's first line then names it, a banner under the title links it, and headline.md opens on the same banner.
A later relayout keeps it (it reads superseded.json). Exit code 2 with one line for a folder that is not a report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from hacrl_exp.config.report_schema import ReportConfig
from hacrl_exp.errors import ConfigError, OutputError, exit_on_bad_input
from hacrl_exp.paths import replace_atomic
from hacrl_exp.report import layout
from hacrl_exp.report.layout import Superseded
from hacrl_exp.report.load import TOTALS
from hacrl_exp.report.opening import bottom_line, claims_block
from hacrl_exp.report.render import to_html

TABLES = ("comparisons.csv", "accuracy.csv", "cost.csv")
LEVEL, SIGNIFICANCE = ReportConfig.level, ReportConfig.significance
"""The claims block's interval level and significance: the report's defaults, which every published report used."""


def read_tables(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(comparisons, accuracy, cost) of a report folder, cost columns under their current names; ConfigError naming
    a missing file."""
    missing = [name for name in TABLES if not (folder / "tables" / name).is_file()]
    if missing or not (folder / "report.md").is_file():
        what = ", ".join(f"tables/{m}" for m in missing) or "report.md"
        raise ConfigError(f"{folder}: no {what}; give a report folder (reports/<name>) written by the report")
    comparisons, accuracy, cost = (pd.read_csv(folder / "tables" / name) for name in TABLES)
    aliases = {key.split("/")[-1]: name for name, keys in TOTALS.items() for key in keys}
    return comparisons, accuracy, cost.rename(columns={c: aliases[c] for c in cost.columns if c in aliases})


def relayout(folder: Path, superseded: Superseded | None = None) -> str:
    """Write folder/report.md and report.html in the current layout (module docstring) and return the Markdown;
    `superseded` (else the folder's superseded.json) marks it as superseded."""
    comparisons, accuracy, cost = read_tables(folder)
    if superseded is not None:
        if not (folder.parent / superseded.by / "report.md").is_file():
            raise ConfigError(f"--superseded-by {superseded.by}: no report {folder.parent / superseded.by}/report.md")
        entry = json.dumps({"by": superseded.by, "reason": superseded.reason}, ensure_ascii=False, indent=1)
        replace_atomic(folder / layout.SUPERSEDED, lambda tmp: tmp.write_text(entry + "\n"))
    superseded = layout.read_superseded(folder)
    sections = layout.split((folder / "report.md").read_text())[1]
    title = f"Report: {folder.name}"  # an old report's title may name its grid, which its successor shares
    opening = [
        (layout.BOTTOM_LINE, bottom_line(comparisons, accuracy, cost)),
        (layout.CLAIMS_BLOCK, claims_block(comparisons, folder, LEVEL, SIGNIFICANCE)),
    ]
    markdown = layout.page(title, opening, sections, superseded, folder)
    _write(folder / "report.md", markdown)
    _write(folder / "report.html", to_html(markdown, title))
    headline = folder / "headline.md"
    if superseded is not None and headline.is_file():
        kept = [line for line in headline.read_text().split("\n\n") if not line.startswith(layout.BANNER)]
        _write(headline, "\n\n".join([layout.banner(superseded, folder), *kept]))
    return markdown


def _write(path: Path, text: str) -> None:
    replace_atomic(path, lambda tmp: tmp.write_text(text))  # a regular file only, never through a symlink


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m hacrl_exp.report.relayout", description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="report folders (reports/<name>)")
    parser.add_argument("--superseded-by", help="the successor report's folder name (a sibling of each folder)")
    parser.add_argument("--reason", default="", help="why it superseded this one (one phrase, in the banner)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """The command line `argv` (default sys.argv[1:]); 0 once written, a bad input exits 2 (SystemExit)."""
    args = arguments(sys.argv[1:] if argv is None else argv)
    successor = Superseded(args.superseded_by, args.reason) if args.superseded_by else None
    with exit_on_bad_input(ConfigError, OutputError):
        if args.reason and successor is None:
            raise ConfigError("--reason needs --superseded-by: the reason is the successor's")
        for folder in args.folders:
            relayout(folder, successor)
            print(f"laid out {folder / 'report.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
