"""Grade model outputs without a model: `python -m hacrl_exp.grade --in outputs.jsonl --out graded.jsonl`.

For responses another framework generated, or to re-grade an old evaluation after a grader fix. Every verdict comes
from the one grader (`hacrl_exp.rewards.Grader`), as in training and evaluation.

Input (`--in`), one JSON object per line, either
- `benchmark`, `id`, `response`: the gold answer and the question come from that benchmark's data (`--data-dir`, else
  $HACRL_DATA_DIR), graded with the benchmark's extractor and rule; or
- `gold`, `response` (optionally `question`, and `benchmark` for its extractor and rule): graded against that gold,
  normalised as loaders normalise it; without a benchmark, `--extractor` / `--compare` apply (default boxed / math).
A `.parquet` input is an evaluation run's `samples.parquet` (columns benchmark, problem_id, response, answer): it is
re-graded against its `answer` column, with questions from `--data-dir` when given.

Output (`--out`): the same rows in the same order with `reward` (0 or 1), `extracted` and `reason` set under the
grading policy `--forms` (`requested`, the default: an answer that ignores a form its question asks for is wrong;
`value`: the value alone decides), with `grader_forms` naming it and `reward_forms_requested` / `reward_forms_value`
the reward under each policy (JSONL, or parquet for a `.parquet` path). It is checked before grading (a folder that
can be written; not a device, fifo or folder; not a symlink unless `--follow-symlinks`, which writes the link's
target) and replaced atomically. A summary (rows, accuracy under both policies, reasons; for parquet input, verdicts
changed) goes to stdout. A bad row (invalid JSON, a missing field, an unknown benchmark or id, a line over
`--max-row-bytes`, default 1 MiB, read no further than that), a bad --out or a number out of its range (`--timeout`
0.1-600 s, `--workers` 1-64: started at most one per row, a warning above the machine's cores) stops with one line
naming it, exit code 2, and nothing written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

from hacrl_exp.config.flags import MAX_WORKERS, check_number, worker_count
from hacrl_exp.errors import ConfigError, OutputError, exit_on_bad_input
from hacrl_exp.evaluation.data import load_problems
from hacrl_exp.evaluation.spec import BenchmarkSpec, known_benchmarks, load_benchmark
from hacrl_exp.paths import FOLLOW_SYMLINKS_FLAG, check_output, output_error, replace_atomic
from hacrl_exp.rewards import COMPARES, EXTRACTORS, FORMS, Grader, normalize_gold
from hacrl_exp.tasks.base import Problem
from hacrl_exp.tasks.problem_data import data_folder
from hacrl_exp.tasks.rows import LIMIT_RANGE, MIB, DataError, RowLimits, jsonl_records

TIMEOUT_RANGE = (0.1, 600.0)
"""Seconds per answer, as the config's `grader_timeout_s`: below 0.1 s right answers time out, above 10 min a
sympy bomb holds a worker for good."""


class Batch:
    """Rows to grade, grouped by (extractor, compare rule) so each group is one `Grader.grade` call."""

    def __init__(self, data_dir: str | os.PathLike | None, extractor: str, compare: str, forms: str = FORMS[0]):
        self.data_dir, self.extractor, self.compare, self.forms = data_dir, extractor, compare, forms
        self._specs: dict[str, BenchmarkSpec] = {}
        self._problems: dict[str, dict[str, Problem]] = {}
        self.items: list[tuple[str, str, str | None, str, str]] = []
        """(response, gold, question, extractor, compare) per row, in input order."""

    def spec(self, name: str, where: str) -> BenchmarkSpec:
        if name not in self._specs:
            if name not in known_benchmarks():
                raise ConfigError(f"{where}: benchmark {name!r} is unknown; known: {', '.join(known_benchmarks())}")
            self._specs[name] = load_benchmark(name)
        return self._specs[name]

    def problem(self, benchmark: str, pid: str, where: str) -> Problem:
        if benchmark not in self._problems:
            spec = self.spec(benchmark, where)
            self._problems[benchmark] = {p.id: p for p in load_problems(spec, self.data_dir, source="local")}
        found = self._problems[benchmark].get(pid)
        if found is None:
            raise DataError(f"{where}: id {pid!r} is not in benchmark {benchmark}'s data. Check the id.")
        return found

    def add(self, row: dict, where: str, gold_key: str = "gold", id_key: str = "id") -> None:
        """Queue one row; DataError / ConfigError name `where` (file:line) and the fix."""
        response = row.get("response")
        if not isinstance(response, str):
            raise DataError(f"{where}: field 'response' is missing or not a string. Every row needs a response.")
        benchmark = row.get("benchmark")
        extractor, compare, question = self.extractor, self.compare, row.get("question")
        if benchmark is not None:
            spec = self.spec(str(benchmark), where)
            extractor, compare = spec.answer_extractor, spec.grader
        if row.get(gold_key) is not None:
            gold = normalize_gold(str(row[gold_key]))
            if question is None and benchmark is not None and self.data_dir and row.get(id_key) is not None:
                question = self.problem(str(benchmark), str(row[id_key]), where).meta.get("problem_text")
        elif benchmark is not None and row.get(id_key) is not None:
            found = self.problem(str(benchmark), str(row[id_key]), where)
            gold, question = found.answer, question or found.meta.get("problem_text")
        else:
            raise DataError(f"{where}: give either '{gold_key}', or 'benchmark' and '{id_key}' (gold from its data).")
        self.items.append((response, gold, question, extractor, compare))

    def grade(self, grader: Grader) -> list:
        """One Grade per queued row, in order."""
        grades: list = [None] * len(self.items)
        groups: dict[tuple[str, str], list[int]] = {}
        for i, (_, _, _, extractor, compare) in enumerate(self.items):
            groups.setdefault((extractor, compare), []).append(i)
        for (extractor, compare), rows in groups.items():
            picked = [self.items[i] for i in rows]
            out = grader.grade(
                [p[0] for p in picked],
                [p[1] for p in picked],
                questions=[p[2] for p in picked],
                extractor=extractor,
                compare=compare,
                forms=self.forms,
            )
            for i, grade in zip(rows, out):
                grades[i] = grade
        return grades


def read_jsonl(path: Path, batch: Batch, limits: RowLimits | None = None) -> list[dict]:
    """The input rows, each queued in `batch`; a row over `limits` (tasks.rows) is a DataError naming its line."""
    rows = []
    for lineno, row in jsonl_records(path, limits):
        if isinstance(row, DataError):
            raise row
        batch.add(row, f"{path}:{lineno}")
        rows.append(row)
    if not rows:
        raise DataError(f"{path}: no rows to grade.")
    return rows


def grade_jsonl(rows: list[dict], batch: Batch, grader: Grader) -> list[dict]:
    """The rows `read_jsonl` queued, with reward, extracted and reason added."""
    for row, grade in zip(rows, batch.grade(grader)):
        row.update(grading_columns([grade], batch.forms, single=True))
    return rows


def grading_columns(grades: list, forms: str, single: bool = False) -> dict:
    """The columns a graded row gets: reward, extracted, reason (under policy `forms`), grader_forms, and the reward
    under each policy (`reward_forms_<policy>`); one value each when `single`, else one list each."""
    columns = {
        "reward": [g.reward for g in grades],
        "extracted": [g.extracted for g in grades],
        "reason": [g.reason for g in grades],
        "grader_forms": [forms] * len(grades),
        **{f"reward_forms_{policy}": [g.reward_under(policy) for g in grades] for policy in FORMS},
    }
    return {k: v[0] for k, v in columns.items()} if single else columns


def read_samples(path: Path, batch: Batch):
    """An evaluation's samples.parquet, each row queued in `batch`."""
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # a truncated or foreign file: one line, not a traceback
        raise DataError(f"{path}: cannot read it as parquet ({type(exc).__name__}: {exc}).") from None
    missing = [c for c in ("benchmark", "problem_id", "response", "answer") if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: columns {missing} are missing; is it an evaluation run's samples.parquet?")
    for n, row in enumerate(frame.to_dict("records")):
        batch.add(row, f"{path}:row {n}", gold_key="answer", id_key="problem_id")
    if frame.empty:
        raise DataError(f"{path}: no rows to grade.")
    return frame


def grade_samples(frame, batch: Batch, grader: Grader):
    """The frame `read_samples` queued, re-graded; returns (frame, number of verdicts that changed)."""
    grades = batch.grade(grader)
    before = frame["reward"].tolist() if "reward" in frame.columns else [None] * len(frame)
    for column, values in grading_columns(grades, batch.forms).items():
        frame[column] = values
    return frame, sum(b is not None and b != g.reward for b, g in zip(before, grades))


def write(out: Path, payload) -> None:
    """Write atomically (a temp file renamed into place), so a failed run leaves no half-written output; only a
    regular file is ever replaced (`hacrl_exp.paths.replace_atomic`)."""

    def write_to(tmp: Path) -> None:
        if out.suffix == ".parquet":
            import pandas as pd

            pd.DataFrame(payload).to_parquet(tmp, index=False)
        else:
            records = payload.to_dict("records") if hasattr(payload, "to_dict") else payload
            with open(tmp, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)

    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        replace_atomic(out, write_to)
    except OSError as exc:
        raise output_error(exc, out, "or give another --out") or exc from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hacrl_exp.grade", description=__doc__.splitlines()[0])
    parser.add_argument("--in", dest="inp", required=True, help="JSONL of model outputs, or a samples.parquet")
    parser.add_argument("--out", required=True, help="graded rows: .jsonl, or .parquet")
    parser.add_argument("--data-dir", default=None, help="benchmark JSONL folder (default: $HACRL_DATA_DIR)")
    parser.add_argument("--extractor", default="boxed", help=f"for rows without a benchmark: {sorted(EXTRACTORS)}")
    parser.add_argument("--compare", default="math", help=f"for rows without a benchmark: {list(COMPARES)}")
    parser.add_argument("--forms", default=FORMS[0], help=f"grading policy of the math rule: {list(FORMS)}")
    parser.add_argument("--workers", type=int, default=2, help="math-verify processes, 1-64 (at most one per row)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per answer, 0.1-600")
    parser.add_argument("--max-row-bytes", type=int, default=MIB, help="bytes of one input line (default 1 MiB)")
    parser.add_argument(FOLLOW_SYMLINKS_FLAG, action="store_true", help="--out may be a symlink: write its target")
    args = parser.parse_args(argv)
    with exit_on_bad_input(ConfigError, DataError, OutputError):
        inp = Path(args.inp)
        if not inp.is_file():
            raise ConfigError(f"--in={args.inp!r} does not exist. Give a JSONL of outputs or a samples.parquet.")
        out = check_output(args.out, "--out", "file", follow=args.follow_symlinks)  # not a device, nor a symlink
        if out.resolve() == inp.resolve():
            raise ConfigError(f"--out={args.out!r} is the input file; write the graded rows to another path.")
        if args.extractor not in EXTRACTORS or args.compare not in COMPARES:
            raise ConfigError(
                f"--extractor={args.extractor!r} / --compare={args.compare!r}: choose an extractor from "
                f"{sorted(EXTRACTORS)} and a rule from {list(COMPARES)}."
            )
        if args.forms not in FORMS:
            raise ConfigError(
                f"--forms={args.forms!r} is not one of {list(FORMS)}: requested checks the forms a question asks "
                "for, value lets the value alone decide."
            )
        check_numbers(args)
        batch = Batch(data_folder(args.data_dir, "--data-dir"), args.extractor, args.compare, args.forms)
        if inp.suffix == ".parquet":
            frame = read_samples(inp, batch)
        else:  # a response may fill the whole row: the field limit is the row's
            flag = f"--max-row-bytes=<bytes> (now {args.max_row_bytes})"
            rows = read_jsonl(inp, batch, RowLimits(args.max_row_bytes, args.max_row_bytes, flag, flag))
        workers = worker_count("--workers", args.workers, len(batch.items))
        with Grader(args.timeout, workers) as grader:
            if inp.suffix == ".parquet":
                payload, changed = grade_samples(frame, batch, grader)
                records = payload.to_dict("records")
            else:
                payload, changed = grade_jsonl(rows, batch, grader), None
                records = payload
        write(out, payload)
    counts = " ".join(f"{k}={v}" for k, v in sorted(Counter(r["reason"] for r in records).items()))
    other = next(f for f in FORMS if f != args.forms)
    accuracy = {f: sum(r[f"reward_forms_{f}"] for r in records) / len(records) for f in FORMS}
    print(
        f"graded {len(records)} rows under grader forms={args.forms}: accuracy {accuracy[args.forms]:.4f} ({counts}); "
        f"under forms={other}: {accuracy[other]:.4f} -> {out}"
    )
    if changed is not None:
        print(f"{changed} verdicts differ from the ones stored in {inp.name}")
    return 0


def check_numbers(args: argparse.Namespace) -> None:
    """Each numeric flag finite and in its range (config/flags.py); --workers is checked with the rows' count."""
    check_number("--timeout", args.timeout, *TIMEOUT_RANGE)
    check_number("--max-row-bytes", args.max_row_bytes, *LIMIT_RANGE)
    check_number("--workers", args.workers, 1, MAX_WORKERS)


if __name__ == "__main__":
    sys.exit(main())
