"""Data rows, validated the same way by every loader (training tasks and benchmarks), with one policy for bad rows.

A bad row is a line that is not UTF-8, not JSON or not a JSON object, a blank line between rows, a row holding
text that cannot be encoded as UTF-8 (a lone surrogate escape such as \\ud800) or a non-finite number (NaN,
Infinity, 1e400), a row whose required field is missing or empty, or a row whose id repeats an earlier one. The
policy (`task.bad_rows`) says what happens to it:

  error  loading stops with a `DataError` naming file:line, what is wrong and the fix (the default);
  skip   the row is dropped and counted by reason (`BadRows.counts`); each is logged as a warning, the totals are
         printed once per file and reported in the run as metrics `train/skipped_rows[/<reason>]`.

Blank lines after the last row are not rows (an editor's trailing newline loses nothing). A file without a single
usable row is an error under both policies.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)

BAD_ROW_POLICIES = ("error", "skip")
T = TypeVar("T")


class DataError(ValueError):
    """A bad data file or row. The message names the file, the 1-based line number, and the fix.

    reason: a short tag (not_utf8, invalid_json, not_an_object, empty_row, missing_field, empty_field, duplicate_id,
    no_rows, ...) by which skipped rows are counted.
    """

    def __init__(self, message: str, reason: str = "bad_data") -> None:
        super().__init__(message)
        self.reason = reason


def jsonl_records(path: Path) -> Iterator[tuple[int, dict | DataError]]:
    """(1-based line, row or the DataError describing it) for each line of a JSONL file but trailing blank ones."""
    blank: list[int] = []
    with open(path, "rb") as f:  # bytes: decode per line, so one bad byte names its line
        for lineno, raw in enumerate(f, 1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8").lstrip("\ufeff") if lineno == 1 else raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield lineno, DataError(f"{where}: not valid UTF-8 (byte {e.start}). Re-save it as UTF-8.", "not_utf8")
                continue
            if not line.strip():
                blank.append(lineno)  # a row only if another row follows
                continue
            for empty in blank:
                yield empty, DataError(f"{path}:{empty}: an empty line between rows.", "empty_row")
            blank = []
            try:
                row = json.loads(line, parse_constant=_refuse_constant)
            except json.JSONDecodeError as e:
                yield lineno, DataError(f"{where}: invalid JSON ({e.msg}, column {e.colno}).", "invalid_json")
                continue
            except DataError as e:
                yield lineno, DataError(f"{where}: {e}", e.reason)
                continue
            problem = _bad_value(row)
            if problem is not None:
                yield lineno, DataError(f"{where}: {problem[0]}", problem[1])
            elif not isinstance(row, dict):
                yield (
                    lineno,
                    DataError(f"{where}: a JSON {type(row).__name__}, not an object {{...}}.", "not_an_object"),
                )
            elif not row:
                yield lineno, DataError(f"{where}: an empty row {{}}.", "empty_row")
            else:
                yield lineno, row


def _refuse_constant(name: str) -> None:
    raise DataError(f"{name} is not a finite number. Give a finite number or text.", "not_finite")


def _bad_value(value: Any, key: str = "") -> tuple[str, str] | None:
    """(what is wrong, reason) for the first value in a parsed row that training could not use, else None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            where = f" in field {key!r}" if key else ""
            bad = value[e.start : e.end].encode("unicode_escape").decode()
            return f"text{where} cannot be encoded as UTF-8 (lone surrogate {bad}). Fix or drop it.", "not_utf8"
    elif isinstance(value, float) and not math.isfinite(value):
        where = f"field {key!r}" if key else "a number"
        return f"{where} is {value}, not a finite number (too large for a float?). Give a finite number.", "not_finite"
    elif isinstance(value, dict):
        for k, v in value.items():
            found = _bad_value(k, k) or _bad_value(v, k)
            if found:
                return found
    elif isinstance(value, list):
        return next((found for v in value if (found := _bad_value(v, key))), None)
    return None


def field_text(row: dict, name: str | None, where: str, required: bool, target: str | None = None) -> str | None:
    """Row field `name` as text: numbers become their decimal text, a list its first item.

    A required field that is missing, empty or not text raises DataError naming `where` (file:line) and the field
    (with `target`, the role it plays, when the benchmark renames it).
    """
    value: Any = row.get(name) if name else None
    if isinstance(value, list):  # e.g. OlympiadBench on the hub: final_answer and solution are lists
        value = value[0] if value else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(int(value)) if float(value).is_integer() else str(value)
    if required and (not isinstance(value, str) or not value.strip()):
        label = f"field {name!r}" + (f" ({target})" if target and target != name else "")
        if value is None:
            raise DataError(f"{where}: {label} is missing. Give it a non-empty string.", "missing_field")
        raise DataError(f"{where}: {label} is empty or not text ({str(value)[:40]!r}).", "empty_field")
    return value if isinstance(value, str) else None


def check_unique(row_id: str, where: str, lineno: int, seen: dict[str, int]) -> None:
    """Record `row_id`; a repeat raises DataError naming both lines."""
    if row_id in seen:
        raise DataError(
            f"{where}: duplicate id {row_id!r} (first on line {seen[row_id]}). Make ids unique.", "duplicate_id"
        )
    seen[row_id] = lineno


class BadRows:
    """The bad-row policy of one loader: `error` re-raises a row's DataError (with prefix and hint), `skip` counts."""

    def __init__(self, policy: str = "error", prefix: str = "", hint: str = "") -> None:
        if policy not in BAD_ROW_POLICIES:
            raise ValueError(f"bad_rows={policy!r} is not one of {list(BAD_ROW_POLICIES)}")
        self.policy, self.prefix, self.hint = policy, prefix, hint
        self.counts: Counter[str] = Counter()

    @property
    def skipped(self) -> int:
        """Rows skipped so far."""
        return sum(self.counts.values())

    def keep(
        self,
        records: Iterable[tuple[int, dict | DataError]],
        build: Callable[[int, dict], T],
        name: str,
        limit: int | None = None,
    ) -> list[T]:
        """build(line, row) of the good records of file `name` (the first `limit`); bad ones raise or are counted."""
        out: list[T] = []
        before = Counter(self.counts)
        for lineno, row in records:
            if limit is not None and len(out) >= limit:
                break
            try:
                if isinstance(row, DataError):
                    raise row
                out.append(build(lineno, row))
            except DataError as e:
                if self.policy == "error":
                    raise DataError(f"{self.prefix}{e} {self.hint}".strip(), e.reason) from None
                self.counts[e.reason] += 1
                log.warning("skipping bad row: %s%s", self.prefix, e)
        skipped = self.counts - before
        if skipped:
            reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(skipped.items()))
            log.warning("%s%s: skipped %d bad rows (%s); bad_rows=skip", self.prefix, name, skipped.total(), reasons)
        return out

    def metrics(self) -> dict[str, float]:
        """{'train/skipped_rows': total, 'train/skipped_rows/<reason>': count}; empty when nothing was skipped."""
        if not self.counts:
            return {}
        return {"train/skipped_rows": float(self.skipped)} | {
            f"train/skipped_rows/{reason}": float(n) for reason, n in sorted(self.counts.items())
        }


def skipped_row_metrics(task: object) -> dict[str, float]:
    """The run's report of skipped data rows (metrics of the task's `bad_rows` policy; {} for generated tasks)."""
    policy = getattr(task, "bad_rows", None)
    return policy.metrics() if isinstance(policy, BadRows) else {}
