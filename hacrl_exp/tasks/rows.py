"""Data rows, validated the same way by every loader (training tasks and benchmarks), with one policy for bad rows.

A bad row is a line that is not UTF-8, not JSON or not a JSON object, a blank line between rows, a row holding
text that cannot be encoded as UTF-8 (a lone surrogate escape such as \\ud800) or a non-finite number (NaN,
Infinity, 1e400), a row whose required field is missing or empty, a row or field over its size limit (below), or
a row whose id repeats an earlier one. The
policy (`task.bad_rows`) says what happens to it:

  error  loading stops with a `DataError` naming file:line, what is wrong and the fix (the default);
  skip   the row is dropped and counted by reason (`BadRows.counts`); each is logged as a warning, the totals are
         printed once per file and reported in the run as metrics `train/skipped_rows[/<reason>]`.

Blank lines after the last row are not rows (an editor's trailing newline loses nothing). A file without a single
usable row is an error under both policies.

Size limits (`RowLimits`): a row (one line, in bytes) is at most 1 MiB and a text field at most 256 Ki characters;
`HACRL_MAX_ROW_BYTES` / `HACRL_MAX_FIELD_CHARS` raise them (`python -m hacrl_exp.grade`: `--max-row-bytes`). A line
is read at most up to its limit, so a 240 MB `problem` costs 1 MiB, not the gigabytes its parsing and tokenising
would: the row is bad (`row_too_large`, `field_too_large`), named by file, line and field.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from hacrl_exp.errors import ConfigError

log = logging.getLogger(__name__)

BAD_ROW_POLICIES = ("error", "skip")
T = TypeVar("T")
MIB = 1 << 20
ROW_BYTES_ENV, FIELD_CHARS_ENV = "HACRL_MAX_ROW_BYTES", "HACRL_MAX_FIELD_CHARS"
LIMIT_RANGE = (1024, 1 << 30)
"""What either limit may be set to: 1 KiB to 1 GiB (a row above 1 GiB is what the limit exists to refuse)."""
_KEY = re.compile(rb'"((?:[^"\\]|\\.){1,200})"\s*:')


class DataError(ValueError):
    """A bad data file or row. The message names the file, the 1-based line number, and the fix.

    reason: a short tag (not_utf8, invalid_json, not_an_object, empty_row, missing_field, empty_field, duplicate_id,
    row_too_large, field_too_large, no_rows, ...) by which skipped rows are counted.
    """

    def __init__(self, message: str, reason: str = "bad_data") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class RowLimits:
    """The size limits of a data row: `row_bytes` per line (its newline not counted), `field_chars` per text value.
    `row_flag` / `field_flag`: what raises each, named in the error."""

    row_bytes: int = MIB
    field_chars: int = 256 * 1024
    row_flag: str = f"{ROW_BYTES_ENV}=<bytes>"
    field_flag: str = f"{FIELD_CHARS_ENV}=<characters>"

    @classmethod
    def from_env(cls) -> RowLimits:
        """The defaults, or what $HACRL_MAX_ROW_BYTES / $HACRL_MAX_FIELD_CHARS set (a ConfigError when either is not
        an integer in LIMIT_RANGE)."""
        return cls(_env_limit(ROW_BYTES_ENV, cls.row_bytes), _env_limit(FIELD_CHARS_ENV, cls.field_chars))


def _env_limit(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    low, high = LIMIT_RANGE
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ConfigError(f"{name}={raw!r} is not an integer in [{low}, {high}]; unset it for the default {default}")
    return int(raw)


def bounded_lines(f, limit: int) -> Iterator[tuple[bytes, bool]]:
    """(line, whole) for each line of binary file `f`, reading at most `limit` + 1 bytes of any line: a longer line
    comes back cut to that (whole=False) and the rest of it is skipped unread into memory."""
    while True:
        raw = f.readline(limit + 1)
        if not raw:
            return
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw, True
            continue
        yield raw, False
        while (rest := f.readline(MIB)) and not rest.endswith(b"\n"):
            pass


def _row_too_large(where: str, start: bytes, limits: RowLimits) -> DataError:
    keys = _KEY.findall(start)
    inside = f" (still inside field {keys[-1].decode('utf-8', 'replace')!r} at the limit)" if keys else ""
    return DataError(
        f"{where}: the row is over {limits.row_bytes:,} bytes{inside}. Shorten or drop it, or raise the limit "
        f"with {limits.row_flag}.",
        "row_too_large",
    )


def jsonl_records(path: Path, limits: RowLimits | None = None) -> Iterator[tuple[int, dict | DataError]]:
    """(1-based line, row or the DataError describing it) for each line of a JSONL file but trailing blank ones.
    A line over `limits` (default `RowLimits.from_env()`) is not read whole: its DataError names the field."""
    limits = limits or RowLimits.from_env()
    blank: list[int] = []
    with open(path, "rb") as f:  # bytes: decode per line, so one bad byte names its line
        for lineno, (raw, whole) in enumerate(bounded_lines(f, limits.row_bytes), 1):
            where = f"{path}:{lineno}"
            if not whole:
                for empty in blank:
                    yield empty, DataError(f"{path}:{empty}: an empty line between rows.", "empty_row")
                blank = []
                yield lineno, _row_too_large(where, raw, limits)
                continue
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
            problem = _bad_value(row) or _long_value(row, limits)
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


def _long_value(value: Any, limits: RowLimits, key: str = "") -> tuple[str, str] | None:
    """(what is wrong, reason) for the first text in a parsed row longer than `limits.field_chars`, else None."""
    if isinstance(value, str) and len(value) > limits.field_chars:
        where = f"field {key!r}" if key else "a text value"
        return (
            f"{where} holds {len(value):,} characters, over the limit of {limits.field_chars:,}. Shorten or drop "
            f"it, or raise the limit with {limits.field_flag}.",
            "field_too_large",
        )
    if isinstance(value, dict):
        return next((found for k, v in value.items() if (found := _long_value(v, limits, str(k)))), None)
    if isinstance(value, list):
        return next((found for v in value if (found := _long_value(v, limits, key))), None)
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
