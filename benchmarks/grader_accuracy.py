"""Grader accuracy on a hand-labelled set: our Grader beside math-verify and lm-eval's two MATH graders.

    python -m benchmarks.grader_accuracy [--set tests/rewards/data/grader_adversarial.jsonl] [--show-errors GRADER]
    python -m benchmarks.grader_accuracy --outside   # ours on other graders' test suites (benchmarks/outside_suites.py)

Each grader is a function (responses, golds) -> 0/1 verdicts, run on the whole set after a warm-up on 5 other pairs
(worker start, imports, sympy's first-call costs):
  ours              hacrl_exp.rewards.Grader (timeout 5 s, 2 workers) on normalize_gold(gold), with each row's question
                    (from --data-dir) as training and evaluation pass it
  math_verify_raw   math-verify alone: verify(parse(f"${gold}$"), parse(response)) on the whole response (its
                    default extraction), with its own 5 s parsing and verification timeouts
  lmeval_minerva    lm-eval's minerva_math functions: its answer extraction, normalize_final_answer on both sides
                    (as its process_docs does to the gold), is_equiv
  lmeval_hendrycks  lm-eval's hendrycks_math functions: remove_boxed(last_boxed_only_string(response)), is_equiv
Pairs whose grading raised count as 0 and are counted per exception type. Printed: accuracy against the labels,
false positives (label 0 graded 1), false negatives, answers/s, accuracy per `kind` and per benchmark; the JSON goes
to benchmarks/results/grader_accuracy.json. `--show-errors GRADER` lists that grader's wrong pairs.
`--outside` grades tests/rewards/data/outside/ with ours instead: agreement per suite, false positives, and every
disagreement with its reviewed class (JSON to benchmarks/results/grader_accuracy_outside.json).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import finish, print_table
from hacrl_exp.errors import ConfigError, exit_on_bad_input
from hacrl_exp.repo import REPO_ROOT

DEFAULT_SET = REPO_ROOT / "tests" / "rewards" / "data" / "grader_adversarial.jsonl"
FIELDS = ("id", "benchmark", "gold", "response", "label", "kind")
"""Fields every row needs; the set's other fields (problem_id, form, why, problem) are carried along unread."""
TIMEOUT_S = 5
WARM = (
    ["so \\boxed{\\frac{3}{4}}", "\\boxed{2\\sqrt{3}}", "\\boxed{(1, 2]}", "\\boxed{x^2+1}", "\\boxed{17}"],
    ["\\frac34", "\\sqrt{12}", "(1,2]", "1+x^2", "18"],
    [None] * 5,
)
"""Warm-up pairs, none of them in the set, so no verdict cache holds a timed pair."""

Grade01 = Callable[[list[str], list[str], list[str | None]], list[int]]
"""(responses, golds, questions) -> 0/1 verdicts; only ours reads the questions (the forms they ask for)."""


@dataclass
class Contender:
    """One grader: its verdict function, how it reads an answer (for --show-errors only), and its notes."""

    name: str
    grade: Grade01
    extract: Callable[[str], object]
    raised: Counter = field(default_factory=Counter)
    """Exception type name -> pairs whose grading raised it (graded 0)."""
    notes: list[str] = field(default_factory=list)
    close: Callable[[], None] = lambda: None
    describe: Callable[[list[str]], list[str]] = lambda golds: []
    """More notes on the set's golds, worked out after the timed call."""


def load_set(path: Path) -> list[dict]:
    """The labelled rows; ConfigError naming the file, line and field on bad input."""
    if not path.is_file():
        raise ConfigError(f"--set={str(path)!r} does not exist; give the labelled JSONL (fields {', '.join(FIELDS)})")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{path}:{n}: not JSON ({exc}); fix or delete the line") from None
        missing = [f for f in FIELDS if f not in row]
        if missing:
            raise ConfigError(f"{path}:{n}: field(s) {missing} missing; every row needs {list(FIELDS)}")
        if row["label"] not in (0, 1):
            raise ConfigError(f"{path}:{n}: label={row['label']!r} must be 0 or 1")
        rows.append(row)
    if not rows:
        raise ConfigError(f"--set={str(path)!r} has no rows")
    return rows


def attach_questions(rows: list[dict], data_dir: str) -> None:
    """Each row's `question`: the problem text of (benchmark, problem_id) in the data folder, as training and
    evaluation pass it to the grader. Without the folder, rows keep a `question`
    field of their own or have none (then no requested form is checked, and form-rule rows grade as plain pairs)."""
    from hacrl_exp.evaluation.data import load_problems
    from hacrl_exp.evaluation.spec import load_benchmark

    if not Path(data_dir).is_dir():
        print(f"note: {data_dir} not found; grading without the questions' requested forms")
        return
    texts = {}
    for benchmark in sorted({r["benchmark"] for r in rows}):
        texts |= {(benchmark, p.id): p.meta["problem_text"] for p in load_problems(load_benchmark(benchmark), data_dir)}
    for row in rows:
        row.setdefault("question", texts.get((row["benchmark"], row.get("problem_id"))))


def ours() -> Contender:
    from hacrl_exp.rewards import Grader, normalize_gold

    # one grader for the warm-up and the timed call, so the timed call runs on started, warm workers
    grader = Grader(timeout_s=float(TIMEOUT_S), workers=2)
    contender = Contender("ours", lambda r, g: [], grader.extract, close=grader.close)

    def grade(responses: list[str], golds: list[str], questions: list[str | None]) -> list[int]:
        grades = grader.grade(responses, [normalize_gold(gd) for gd in golds], questions=questions)
        for x in grades:
            if x.reason not in ("correct", "wrong", "no_answer"):  # timeout, grader_error: never raised, counted
                contender.raised[x.reason] += 1
        return [int(x.reward) for x in grades]

    contender.grade = grade
    return contender


def math_verify_raw() -> Contender:
    from math_verify import parse, verify

    contender = Contender("math_verify_raw", lambda r, g: [], lambda r: parse(r, parsing_timeout=TIMEOUT_S))

    def grade(responses: list[str], golds: list[str], questions: list[str | None]) -> list[int]:
        out = []
        for response, gold in zip(responses, golds):
            try:
                # the gold in $...$, as math-verify's README parses a gold answer: bare, parse() misses or misreads
                # much LaTeX (a tuple read as its first number, \frac{20000}{\pi} as nothing)
                gold_parsed = parse(f"${gold}$", parsing_timeout=TIMEOUT_S)
                target = parse(response, parsing_timeout=TIMEOUT_S)
                out.append(int(verify(gold_parsed, target, timeout_seconds=TIMEOUT_S)))
            except Exception as exc:  # noqa: BLE001 - any failure is "not equivalent", counted by type
                contender.raised[type(exc).__name__] += 1
                out.append(0)
        return out

    def describe(golds: list[str]) -> list[str]:
        distinct = set(golds)
        bare = sum(not parse(g, parsing_timeout=TIMEOUT_S) for g in distinct)
        return [f"gold given as $gold$; bare parse(gold) reads nothing from {bare} of {len(distinct)} distinct golds"]

    contender.grade, contender.describe = grade, describe
    return contender


def _minerva_module() -> tuple[object, str]:
    """lm-eval's minerva_math utils, and a note when its import needed the antlr version check bypassed."""
    name = "lm_eval.tasks.minerva_math.utils"
    try:
        return importlib.import_module(name), ""
    except AssertionError:
        pass
    # The module asserts antlr4-python3-runtime 4.11 at import (lm-eval[math]); hydra-core pins 4.9.3, so the
    # check fails here. Import past it only to measure what its functions then do in this environment: for this one
    # import, a distribution record saying 4.11 comes first on sys.path (importlib.metadata reads the first it finds).
    installed = importlib.metadata.version("antlr4-python3-runtime")
    with tempfile.TemporaryDirectory() as folder:
        record = Path(folder) / "antlr4_python3_runtime-4.11.dist-info"
        record.mkdir()
        (record / "METADATA").write_text("Metadata-Version: 2.1\nName: antlr4-python3-runtime\nVersion: 4.11\n")
        sys.path.insert(0, folder)
        try:
            module = importlib.import_module(name)
        finally:
            sys.path.remove(folder)
    return module, (
        f"importing {name} raises AssertionError here (it wants antlr4-python3-runtime 4.11, from lm-eval[math]; "
        f"{installed} is installed, as hydra-core needs), so it was imported with that "
        "version check bypassed; its is_equiv then raises ImportError (sympy's parse_latex wants antlr 4.11) on "
        "every pair that its string-equality shortcut does not settle"
    )


def lmeval_minerva() -> Contender:
    m, note = _minerva_module()
    logging.getLogger(m.__name__).setLevel(logging.CRITICAL)  # is_equiv logs every ImportError before raising it
    contender = Contender(
        "lmeval_minerva", lambda r, g: [], lambda r: None, describe=lambda golds: [note] if note else []
    )
    paths: Counter = Counter()

    def answer(response: str) -> str | None:
        raw = m.get_unnormalized_answer(response)  # the task's own: "Final Answer: The final answer is X. ..."
        if raw == "[invalidanswer]":
            paths["box"] += 1
            boxed = m.last_boxed_only_string(response)  # the set boxes its answers, as the prompts here ask
            if boxed is None:
                return None
            raw = m.remove_boxed(boxed)
        else:
            paths["final_answer_line"] += 1
        return m.normalize_final_answer(raw)

    def grade(responses: list[str], golds: list[str], questions: list[str | None]) -> list[int]:
        out = []
        paths.clear()
        for response, gold in zip(responses, golds):
            try:
                extracted = answer(response)
                out.append(int(extracted is not None and bool(m.is_equiv(extracted, m.normalize_final_answer(gold)))))
            except Exception as exc:  # noqa: BLE001 - any failure is "not equivalent", counted by type
                contender.raised[type(exc).__name__] += 1
                out.append(0)
        contender.notes.append(
            f"answers read by minerva's 'Final Answer: The final answer is' pattern: {paths['final_answer_line']}, "
            f"else from the last box with its last_boxed_only_string/remove_boxed: {paths['box']}"
        )
        return out

    contender.grade = grade
    contender.extract = answer
    return contender


def lmeval_hendrycks() -> Contender:
    h = importlib.import_module("lm_eval.tasks.hendrycks_math.utils")
    contender = Contender("lmeval_hendrycks", lambda r, g: [], lambda r: None)

    def answer(response: str) -> str | None:
        boxed = h.last_boxed_only_string(response)
        return None if boxed is None else h.remove_boxed(boxed)

    def grade(responses: list[str], golds: list[str], questions: list[str | None]) -> list[int]:
        out = []
        for response, gold in zip(responses, golds):
            try:
                out.append(int(bool(h.is_equiv(answer(response), gold))))  # is_equiv(None, gold) is False
            except Exception as exc:  # noqa: BLE001 - e.g. remove_boxed's assertion on an \fbox
                contender.raised[type(exc).__name__] += 1
                out.append(0)
        return out

    contender.grade = grade
    contender.extract = answer
    return contender


GRADERS: dict[str, Callable[[], Contender]] = {
    "ours": ours,
    "math_verify_raw": math_verify_raw,
    "lmeval_minerva": lmeval_minerva,
    "lmeval_hendrycks": lmeval_hendrycks,
}


def score(rows: list[dict], verdicts: list[int]) -> dict:
    """Accuracy against the labels, false positives/negatives, and accuracy per kind and per benchmark."""
    right = [v == r["label"] for r, v in zip(rows, verdicts)]

    def accuracy_by(key: str) -> dict[str, float]:
        groups: dict[str, list[bool]] = {}
        for r, ok in zip(rows, right):
            groups.setdefault(r[key], []).append(ok)
        return {k: sum(v) / len(v) for k, v in sorted(groups.items())}

    return {
        "accuracy": sum(right) / len(rows),
        "false_positives": sum(v == 1 and r["label"] == 0 for r, v in zip(rows, verdicts)),
        "false_negatives": sum(v == 0 and r["label"] == 1 for r, v in zip(rows, verdicts)),
        "by_kind": accuracy_by("kind"),
        "by_benchmark": accuracy_by("benchmark"),
    }


def run(contender: Contender, rows: list[dict]) -> dict:
    """Warm the grader, then grade every row in one timed call."""
    contender.grade(*WARM)
    contender.raised.clear()
    contender.notes.clear()
    responses, golds = [r["response"] for r in rows], [r["gold"] for r in rows]
    questions = [r.get("question") for r in rows]
    start = time.perf_counter()
    verdicts = contender.grade(responses, golds, questions)
    seconds = time.perf_counter() - start
    contender.notes += contender.describe(golds)
    if len(verdicts) != len(rows):
        raise RuntimeError(f"{contender.name} returned {len(verdicts)} verdicts for {len(rows)} pairs")
    return {
        **score(rows, verdicts),
        "verdicts": verdicts,
        "seconds": seconds,
        "answers_per_s": len(rows) / seconds,
        "raised": dict(contender.raised),
        "notes": list(contender.notes),
    }


def show_errors(contender: Contender, rows: list[dict], verdicts: list[int], tail: int = 80) -> None:
    """Each wrong pair of one grader: id, label, verdict, gold, what the grader read (or the response's tail)."""
    wrong = [(r, v) for r, v in zip(rows, verdicts) if v != r["label"]]
    print(f"\n### {contender.name}: {len(wrong)} wrong pairs\n")
    for row, verdict in wrong:
        try:
            read = contender.extract(row["response"])
        except Exception as exc:  # noqa: BLE001 - show what the grader hit
            read = f"<{type(exc).__name__}>"
        seen = repr(read) if read is not None else "None; response ends " + repr(row["response"][-tail:])
        print(
            f"- {row['id']} [{row['kind']}] label {row['label']}, graded {verdict}: gold {row['gold']!r}, read {seen}"
        )


def run_outside(out: str) -> None:
    """`--outside`: our grader on the outside suites, the table and every disagreement printed."""
    from benchmarks.outside_suites import grade_cases, load_cases, load_reviews, print_outside
    from hacrl_exp.rewards import Grader

    started = time.perf_counter()
    cases, reviews = load_cases(), load_reviews()
    with Grader(timeout_s=float(TIMEOUT_S), workers=2) as grader:
        outcomes = grade_cases(grader, cases, reviews)
    summary = print_outside(outcomes)
    verdicts = {o.case["id"]: {"ours": o.ours, "reason": o.reason, "extracted": o.extracted} for o in outcomes}
    finish("grader_accuracy --outside", started, out, {"summary": summary, "verdicts": verdicts})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default=str(DEFAULT_SET), help="labelled JSONL (fields: " + ", ".join(FIELDS) + ")")
    parser.add_argument("--graders", nargs="*", default=list(GRADERS), choices=list(GRADERS))
    parser.add_argument("--show-errors", default=None, metavar="GRADER", help="list this grader's wrong pairs")
    parser.add_argument("--out", default=None, help="JSON results (default: benchmarks/results/, see above)")
    parser.add_argument("--outside", action="store_true", help="grade the outside suites (tests/rewards/data/outside)")
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("HACRL_DATA_DIR") or "../shared/data",
        help="benchmark JSONL folder: each row's full question is looked up by (benchmark, problem_id)",
    )
    parser.add_argument("--limit", type=int, default=None, help="the first N pairs only (benchmarks.smoke)")
    args = parser.parse_args()
    if args.outside:
        run_outside(args.out or "benchmarks/results/grader_accuracy_outside.json")
        return
    args.out = args.out or "benchmarks/results/grader_accuracy.json"
    started = time.perf_counter()
    with exit_on_bad_input(ConfigError):
        if args.show_errors is not None and args.show_errors not in args.graders:
            raise ConfigError(f"--show-errors={args.show_errors!r} is not among the graders run: {args.graders}")
        rows = load_set(Path(args.set))[: args.limit]
        attach_questions(rows, args.data_dir)

    results, contenders = {}, {}
    for name in args.graders:
        contender = contenders[name] = GRADERS[name]()
        try:
            results[name] = run(contender, rows)
        finally:
            contender.close()
        print(f"{name}: {results[name]['seconds']:.1f} s", flush=True)

    kinds = sorted({r["kind"] for r in rows})
    benchmarks = sorted({r["benchmark"] for r in rows})
    labels = Counter(r["label"] for r in rows)
    title = f"{Path(args.set).name}: {len(rows)} pairs, {labels[1]} labelled right, {labels[0]} wrong"
    print_table(
        ["grader", "accuracy", "false pos.", "false neg.", "raised", "answers/s"],
        [
            [
                n,
                r["accuracy"],
                r["false_positives"],
                r["false_negatives"],
                sum(r["raised"].values()),
                r["answers_per_s"],
            ]
            for n, r in results.items()
        ],
        title,
    )
    counts = Counter(r["kind"] for r in rows)
    print_table(
        ["grader", *[f"{k} ({counts[k]})" for k in kinds]],
        [[n, *[r["by_kind"][k] for k in kinds]] for n, r in results.items()],
        "Accuracy per kind",
    )
    counts = Counter(r["benchmark"] for r in rows)
    print_table(
        ["grader", *[f"{b} ({counts[b]})" for b in benchmarks]],
        [[n, *[r["by_benchmark"][b] for b in benchmarks]] for n, r in results.items()],
        "Accuracy per benchmark",
    )
    print("\nNotes:")
    for name, result in results.items():
        raised = ", ".join(f"{k} {v}" for k, v in sorted(result["raised"].items())) or "none"
        print(f"- {name}: raised (graded 0): {raised}" + "".join(f"; {note}" for note in result["notes"]))
    if args.show_errors:
        show_errors(contenders[args.show_errors], rows, results[args.show_errors]["verdicts"])
    payload = {
        "set": str(args.set),
        "pairs": len(rows),
        "labels": dict(labels),
        "ids": [r["id"] for r in rows],  # the order of every grader's "verdicts"
        "cpu_count": os.cpu_count(),
        "load_avg": os.getloadavg(),
        "results": results,
    }
    finish("grader_accuracy", started, args.out, payload)


if __name__ == "__main__":  # the Grader's workers are spawned processes, which re-import this module
    main()
