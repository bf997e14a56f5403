"""Problem data: the one rule for where the JSONL files are, and the one loader from data rows to Problems.

Both the training task (`tasks.math.MathTask`) and the benchmark harness (`evaluation.data.load_problems`) use them:

- the data folder is `data_dir` when one is given, else the `HACRL_DATA_DIR` environment variable, else none
  (`data_folder`); a named folder that is not there is one ConfigError line naming the key and the fix;
- a row becomes a `Problem` the same way for both (`problems_from_records`): the fields named for each part are read
  as text (`tasks.rows.field_text`), ids must be unique, the gold answer is normalised once
  (`hacrl_exp.rewards.normalize_gold`) and kept as written in `meta["answer_raw"]`, the problem as the dataset states
  it in `meta["problem_text"]`, and every other field of the row in `meta`. Bad rows follow the loader's `BadRows`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from hacrl_exp.errors import ConfigError
from hacrl_exp.rewards import normalize_gold
from hacrl_exp.tasks.base import Problem
from hacrl_exp.tasks.rows import BadRows, DataError, check_unique, field_text

DATA_DIR_ENV = "HACRL_DATA_DIR"
PROBLEM_PARTS = ("id", "problem", "answer", "category", "solution")
"""The parts of a Problem a row's fields may fill; `problem` and `answer` are required."""


def data_folder(data_dir: str | os.PathLike | None, key: str = "data_dir") -> Path | None:
    """The JSONL folder: `data_dir`, else $HACRL_DATA_DIR, else None. A named folder that is missing is a ConfigError
    naming `key` (the setting that gave `data_dir`) or the environment variable."""
    given = data_dir not in (None, "")
    raw = data_dir if given else os.environ.get(DATA_DIR_ENV) or None
    if raw is None:
        return None
    folder = Path(os.path.expanduser(os.fspath(raw)))
    if not folder.is_dir():
        origin = key if given else DATA_DIR_ENV
        raise ConfigError(
            f"{origin}={os.fspath(raw)!r} is not a folder. Point it at the folder holding the JSONL files."
        )
    return folder


def resolve_data_path(
    name_or_path: str | os.PathLike, data_dir: str | os.PathLike | None = None, key: str = "data_dir"
) -> Path:
    """The existing file that `name_or_path` names.

    `$VARS` and `~` are expanded. An absolute path must exist. A relative one is tried in the working directory, then
    in the data folder (`data_folder(data_dir, key)`), also with a `.jsonl` suffix added.
    """
    raw = os.fspath(name_or_path)
    expanded = os.path.expanduser(os.path.expandvars(raw))
    if f"${DATA_DIR_ENV}" in expanded or f"${{{DATA_DIR_ENV}}}" in expanded:
        raise FileNotFoundError(
            f"Data path {raw!r} uses ${DATA_DIR_ENV}, which is not set. "
            f"Set it to the folder holding the JSONL files (export {DATA_DIR_ENV}=/path/to/data) or pass a full path."
        )
    path = Path(expanded)
    if path.is_absolute():
        if path.is_file():
            return path
        raise FileNotFoundError(f"Data file {raw!r} does not exist. Check the path.")
    if path.is_file():
        return path.resolve()
    folder = data_folder(data_dir, key)
    if folder is None:
        raise FileNotFoundError(
            f"Data file {raw!r} is not in the working directory and {DATA_DIR_ENV} is not set. "
            f"Set {DATA_DIR_ENV}=/path/to/data (the folder holding the JSONL files) or pass a full path."
        )
    for candidate in (folder / path, folder / f"{path}.jsonl"):
        if candidate.is_file():
            return candidate.resolve()
    origin = key if data_dir not in (None, "") else DATA_DIR_ENV
    raise FileNotFoundError(
        f"Data file {raw!r} is neither in the working directory nor in {folder} ({origin}). "
        f"Check the name, or point {DATA_DIR_ENV} at the folder that holds it."
    )


def problems_from_records(
    records: Iterable[tuple[int, dict | DataError]],
    fields: Mapping[str, str | None],
    where: str,
    prompt: Callable[[str], str],
    default_id: Callable[[int], str],
    policy: BadRows,
    limit: int | None = None,
) -> list[Problem]:
    """The Problems of one file's (or dataset split's) records (module docstring), the first `limit` when given.

    fields: each of PROBLEM_PARTS → the row field that holds it (None or absent: no such field). where: the records'
    place with `{}` for the 1-based row (`path:{}`). prompt: the problem text → the prompt. default_id: the id of a
    row (by its 1-based number) that has none. A file without one usable row is a DataError under both policies.
    """
    seen: dict[str, int] = {}

    def build(lineno: int, row: dict) -> Problem:
        return row_problem(row, fields, where.format(lineno), prompt, default_id(lineno), lineno, seen)

    name = where.format("*").removesuffix(":*")  # a JSONL file's path; a dataset split's "<id>[<split>] row *"
    problems = policy.keep(records, build, name, limit)
    if not problems:
        raise DataError(
            f"{policy.prefix}{name}: no usable rows. Check that it is a JSONL file whose rows hold "
            f"{fields['problem']!r} and {fields['answer']!r}.",
            "no_rows",
        )
    return problems


def row_problem(
    row: dict,
    fields: Mapping[str, str | None],
    where: str,
    prompt: Callable[[str], str],
    default_id: str,
    lineno: int,
    seen: dict[str, int],
) -> Problem:
    """One validated Problem from a row; DataError names `where` (file:line), the field and the fix."""

    def text(part: str, required: bool) -> str | None:
        return field_text(row, fields.get(part), where, required, target=part)

    problem, answer = text("problem", True), text("answer", True)
    problem_id = text("id", False) or default_id
    check_unique(problem_id, where, lineno, seen)
    used = {name for name in fields.values() if name}
    meta = {key: value for key, value in row.items() if key not in used}
    meta.update(answer_raw=meta.get("answer_raw", answer), problem_text=problem)  # answer_raw: for reward=verl
    return Problem(
        id=problem_id,
        prompt=prompt(problem),
        answer=normalize_gold(answer),
        category=text("category", False) or "all",
        solution=text("solution", False),
        meta=meta,
    )
