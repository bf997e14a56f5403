"""Benchmark data: rows from a local JSONL folder, the Hugging Face hub, or the embedded arithmetic tiers -> Problems.

Where data comes from (`source`): 'local' reads `<data folder>/<dataset.local>` (the data folder: `data_dir`, else
$HACRL_DATA_DIR; `hacrl_exp.tasks.problem_data.data_folder`, the training task's rule too); 'hf' loads `dataset.hf`
with the `datasets` package; 'auto' is local when a data folder is given or set, else hf. Rows become Problems
through the training task's loader (`problem_data.problems_from_records`), with the benchmark's field names: every
problem's `prompt` is the benchmark's template filled with the row's problem text; `meta` keeps all other row fields
(the gold check formats its text template with them); gold answers are normalised once, the row's answer as written
stays in `meta["answer_raw"]`. Errors name the benchmark, the file and the 1-based line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.spec import BenchmarkSpec
from hacrl_exp.rewards.extract import SOURCE_EXTRACTORS
from hacrl_exp.tasks.base import Problem
from hacrl_exp.tasks.problem_data import DATA_DIR_ENV, PROBLEM_PARTS, data_folder, problems_from_records
from hacrl_exp.tasks.rows import BadRows, DataError, jsonl_records

SOURCES = ("auto", "local", "hf")


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
    return problems_from_records(
        rows, fields, where, spec.render, lambda line: f"{spec.name}-{line - 1}", policy, limit
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
            if target not in PROBLEM_PARTS:
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
