"""Benchmark data: rows from a local JSONL folder, the Hugging Face hub, or the embedded arithmetic tiers -> Problems.

Where data comes from (`source`): 'local' reads `<data_dir>/<dataset.local>` (data_dir defaults to $HACRL_DATA_DIR);
'hf' loads `dataset.hf` with the `datasets` package; 'auto' is local when a data folder is given or set, else hf.
Every problem's `prompt` is the benchmark's template filled with the row's problem text; `meta` keeps all other row
fields (the gold check formats its text template with them). Gold answers are normalised here, once
(`hacrl_exp.rewards.normalize_gold`); the row's answer as written stays in `meta["answer_raw"]`. Errors name the
benchmark, the file and the 1-based line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.spec import BenchmarkSpec
from hacrl_exp.rewards import normalize_gold
from hacrl_exp.rewards.extract import SOURCE_EXTRACTORS
from hacrl_exp.tasks.base import Problem
from hacrl_exp.tasks.math import DATA_DIR_ENV
from hacrl_exp.tasks.rows import BadRows, DataError, check_unique, field_text, jsonl_records

SOURCES = ("auto", "local", "hf")
FIELD_TARGETS = ("id", "problem", "answer", "category", "solution")


def data_folder(data_dir: str | os.PathLike | None) -> Path | None:
    """The JSONL folder: `data_dir`, else $HACRL_DATA_DIR, else None. A named folder that is missing is an error."""
    raw = data_dir if data_dir not in (None, "") else os.environ.get(DATA_DIR_ENV) or None
    if raw is None:
        return None
    folder = Path(os.path.expanduser(os.fspath(raw)))
    if not folder.is_dir():
        origin = "data_dir" if data_dir not in (None, "") else DATA_DIR_ENV
        raise ConfigError(
            f"{origin}={os.fspath(raw)!r} is not a folder. Point it at the folder holding the JSONL files."
        )
    return folder


def load_problems(
    spec: BenchmarkSpec,
    data_dir: str | os.PathLike | None = None,
    limit: int | None = None,
    source: str = "auto",
    bad_rows: str = "error",
) -> list[Problem]:
    """The first `limit` problems (all when None) of a benchmark, validated; DataError/ConfigError on bad input.

    bad_rows: 'error' (a benchmark's score needs every row) or 'skip' (count and log them; `hacrl_exp.tasks.rows`).
    """
    if source not in SOURCES:
        raise ConfigError(f"source={source!r} is not one of {list(SOURCES)}")
    if spec.embedded is not None:
        return _embedded(spec, limit)
    folder = data_folder(data_dir)
    use_local = source == "local" or (source == "auto" and (folder is not None or not spec.hf))
    if use_local:
        if folder is None:
            raise ConfigError(
                f"benchmark {spec.name}: no data folder. Set data_dir or {DATA_DIR_ENV} to the folder holding "
                f"{spec.local_file}, or use source=hf."
            )
        if not spec.local_file:
            raise ConfigError(f"benchmark {spec.name} has no local file ({spec.path}); use source=hf")
        path = folder / spec.local_file
        if not path.is_file():
            raise DataError(f"benchmark {spec.name}: {path} does not exist. Put {spec.local_file} in {folder}.")
        rows, where, fields = jsonl_records(path), f"{path}:{{}}", spec.fields
    else:
        rows, where, fields = _hf_rows(spec), f"{spec.hf['path']}[{spec.hf.get('split')}] row {{}}", _hf_fields(spec)
    policy = BadRows(bad_rows, prefix=f"benchmark {spec.name}: ", hint="Fix or delete the row.")
    seen: dict[str, int] = {}

    def build(lineno: int, row: dict) -> Problem:
        return _problem(spec, row, where.format(lineno), fields, seen, lineno)

    problems = policy.keep(rows, build, where.format("*"), limit)
    if not problems:
        raise DataError(f"benchmark {spec.name}: {where.format('*')} has no rows.", "no_rows")
    return problems


def _problem(spec: BenchmarkSpec, row: dict, where: str, fields: dict, seen: dict, lineno: int) -> Problem:
    """One Problem from a row, using the benchmark's field names; DataError names benchmark, file:line and field."""

    def text(key: str, required: bool) -> str | None:
        return field_text(row, fields.get(key), where, required, target=key)

    problem, answer = text("problem", True), normalize_gold(text("answer", True))
    pid = text("id", False) or f"{spec.name}-{lineno - 1}"
    check_unique(pid, where, lineno, seen)
    used = {n for n in fields.values() if n}
    meta = {k: v for k, v in row.items() if k not in used}
    meta.update(answer_raw=meta.get("answer_raw", text("answer", True)), problem_text=problem)
    return Problem(
        id=pid,
        prompt=spec.render(problem),
        answer=answer,
        category=text("category", False) or "all",
        solution=text("solution", False),
        meta=meta,
    )


def _hf_fields(spec: BenchmarkSpec) -> dict:
    fields = {**spec.fields, **spec.hf_fields}
    for target in spec.hf_derive:
        fields[target] = f"_derived_{target}"
    return fields


def _hf_rows(spec: BenchmarkSpec) -> Iterator[tuple[int, dict]]:
    """(1-based row, row) from the hub, with `hf_derive` fields computed (e.g. GSM8K's answer after '####')."""
    hf = spec.hf or {}
    try:
        import datasets
    except ImportError:
        raise DataError(
            f"benchmark {spec.name}: no local data folder, and loading {hf.get('path')} from the Hugging Face hub "
            f"needs the `datasets` package (pip install datasets). Or set data_dir / {DATA_DIR_ENV}."
        ) from None
    try:
        ds = datasets.load_dataset(hf["path"], hf.get("name"), split=hf.get("split", "test"))
    except Exception as exc:  # offline, unknown id, missing split: one line, the user's fix
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise DataError(
            f"benchmark {spec.name}: cannot load Hugging Face dataset {hf.get('path')} "
            f"(name={hf.get('name')}, split={hf.get('split', 'test')}): {type(exc).__name__}: {first}. "
            f"Offline? Set data_dir or {DATA_DIR_ENV} to a folder holding {spec.local_file}."
        ) from None
    for i, row in enumerate(ds, 1):
        row = dict(row)
        for target, (field_name, extractor) in spec.hf_derive.items():
            value = row.get(field_name)
            row[f"_derived_{target}"] = SOURCE_EXTRACTORS[extractor](value) if isinstance(value, str) else None
            if target not in FIELD_TARGETS:
                row[target] = row.pop(f"_derived_{target}")
        yield i, row


def _embedded(spec: BenchmarkSpec, limit: int | None) -> list[Problem]:
    """Held-out arithmetic problems; with `limit`, the tiers take turns so a small subset still covers them all."""
    from hacrl_exp.tasks.arithmetic import ArithmeticTask

    cfg = dict(spec.embedded or {})
    tiers = list(cfg.get("tiers") or ["add2"])
    per_tier = int(cfg.get("eval_per_tier", 100))
    if limit is not None:
        per_tier = min(per_tier, math.ceil(limit / len(tiers)))
    task = ArithmeticTask(tiers, bool(cfg.get("scratchpad", True)), per_tier, int(cfg.get("seed", 0)))
    by_tier = [[p for p in task.eval_problems() if p.category == t] for t in tiers]
    ordered = [tier[i] for i in range(per_tier) for tier in by_tier if i < len(tier)]
    out = [
        Problem(p.id, spec.render(p.prompt), p.answer, p.category, p.solution, {**p.meta, "problem_text": p.prompt})
        for p in ordered
    ]
    return out[:limit] if limit is not None else out
