"""The report page's layout: title, superseded banner, the opening, a table of contents with anchors, the sections.

    # Report: <name>[ (superseded by <successor>)]
    > **Superseded** by …                 (a kept old report only: its folder's superseded.json)
    ## Bottom line                         (opening.bottom_line: four sentences per agent)
    ## The claims at a glance             (opening.claims_block: the forest plot's claims rows, one screen)
    ## Contents                            (every ## and ### heading below, linked to its anchor)
    ## Regime, ## Headline, …              (the sections, as the builder lists them)

Anchors are GitHub's heading ids (lower case; letters, marks, digits, '_', '-' and spaces kept; spaces become '-';
a repeated id gets '-1', '-2', …), so the contents' links work on GitHub and in report.html, whose headings
render.to_html gives the same ids. `split` reads a report.md back into its sections (relayout.py), dropping what this
module generates, so laying a page out again is idempotent.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

BOTTOM_LINE, CLAIMS_BLOCK, CONTENTS, REGIME = "Bottom line", "The claims at a glance", "Contents", "Regime"
GENERATED = (BOTTOM_LINE, CLAIMS_BLOCK, CONTENTS)
"""The headings `page` writes before the sections; `split` drops them."""
SUPERSEDED = "superseded.json"
"""In a kept old report's folder: {"by": <successor folder>, "reason": <why, one phrase>}."""
BANNER = "> **Superseded** by "
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def anchor(text: str) -> str:
    """GitHub's id of a heading: lower case, every character but letters, marks, digits, '_', '-' and spaces
    dropped, spaces turned into '-' ('Table 1: final held-out accuracy' → 'table-1-final-held-out-accuracy')."""
    kept = (ch for ch in text.lower() if ch in " -_" or unicodedata.category(ch)[0] in "LMN")
    return "".join(kept).replace(" ", "-")


def unique_anchors(texts: list[str]) -> list[str]:
    """The ids of headings in document order: a repeated id gets '-1', '-2', … as GitHub numbers them."""
    seen: dict[str, int] = {}
    out = []
    for text in texts:
        base = anchor(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(base if n == 0 else f"{base}-{n}")
    return out


def headings(markdown: str) -> list[tuple[int, str]]:
    """(level, text) of every ATX heading outside code fences, in order."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else HEADING.match(line)
        if match:
            found.append((len(match.group(1)), match.group(2)))
    return found


def contents(markdown: str) -> list[str]:
    """The table of contents of the ## and ### headings after '## Contents', nested, each linked to its anchor."""
    found = headings(markdown)
    ids = unique_anchors([text for _, text in found])
    start = next((i for i, (level, text) in enumerate(found) if level == 2 and text == CONTENTS), -1)
    return [
        f"{'  ' * (level - 2)}- [{text}](#{id_})"
        for (level, text), id_ in list(zip(found, ids))[start + 1 :]
        if level in (2, 3)
    ]


@dataclass(frozen=True)
class Superseded:
    """A kept old report's successor (a sibling folder) and why it superseded it."""

    by: str
    reason: str = ""


def read_superseded(folder: Path) -> Superseded | None:
    """The folder's superseded.json, or None."""
    path = folder / SUPERSEDED
    if not path.is_file():
        return None
    entry = json.loads(path.read_text())
    return Superseded(entry["by"], entry.get("reason", ""))


def banner(superseded: Superseded, folder: Path) -> str:
    """The blockquote under a superseded report's title: its successor (linked), why, and what the page still is."""
    why = f": {superseded.reason}" if superseded.reason else ""
    rederived = (
        "; its comparisons judged again under the current rules: [rederived_claims.md](rederived_claims.md)"
        if (folder / "rederived_claims.md").is_file()
        else ""
    )
    return (
        f"{BANNER}[`{superseded.by}`](../{superseded.by}/report.md){why}. Kept as published: its numbers and "
        f"verdicts are those of the code and rules it was built with{rederived}."
    )


def title_line(title: str, superseded: Superseded | None) -> str:
    """'# Report: x', or '# Report: x (superseded by y)': a superseded report names its successor on line 1."""
    return f"# {title}" + (f" (superseded by {superseded.by})" if superseded else "")


def page(title: str, opening: list[tuple[str, list[str]]], sections: list[tuple[str, list[str]]],
         superseded: Superseded | None = None, folder: Path | None = None) -> str:  # fmt: skip
    """The report's Markdown: title line, banner, the opening sections, the contents, then the sections."""
    md = [title_line(title, superseded), ""]
    if superseded:
        md += [banner(superseded, folder or Path(".")), ""]
    for heading, lines in [*opening, (CONTENTS, ["{contents}"]), *sections]:
        md += [f"## {heading}", "", *lines]
        md += [""] if not lines or lines[-1] != "" else []
    text = "\n".join(md)
    return text.replace("{contents}", "\n".join(contents(text)), 1)


def split(markdown: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """(title without '# ' and without a superseded suffix, [(## heading, its lines)]) of a report.md: the text
    between the title and the first ## heading becomes the Regime section (reports written before it had a
    heading); the generated opening, contents and banner are dropped."""
    lines = markdown.splitlines()
    title = re.sub(r" \(superseded by [^)]*\)$", "", lines[0].removeprefix("# "))
    sections: list[tuple[str, list[str]]] = [(REGIME, [])]
    fenced = False
    for line in lines[1:]:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif not (line.startswith(BANNER) and len(sections) == 1):
            sections[-1][1].append(line)
    kept = [(h, body) for h, body in sections if h not in GENERATED]
    if not "".join(kept[0][1]).strip():  # no text before the first heading: an old report without a regime
        kept = kept[1:]
    return title, [(h, _trim(body)) for h, body in kept]


def _trim(lines: list[str]) -> list[str]:
    """The lines without leading and trailing blank lines, ending in one blank line."""
    text = "\n".join(lines).strip("\n")
    return [*text.split("\n"), ""] if text else []
