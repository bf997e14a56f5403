r"""Gold agreement: grade every benchmark's gold solution text against its gold answer with the real grader.

    python -m hacrl_exp.evaluation.gold [--data-dir DIR] [--benchmarks math500 gsm8k ...] [--limit N] [--workers 2]

For each benchmark whose YAML has a `gold` block, the gold text (a template over the row's fields) goes through the
benchmark's gold extractor and then the one grader (`hacrl_exp.rewards.Grader`, as in training and evaluation).
agreement = rows whose text the grader accepts / rows with a solution. A row agrees when the grader accepts one of the
extracted candidates (most extractors give one).

The rewrite check: each gold answer is rewritten into a second equivalent form (`hacrl_exp.rewards.rewrite`:
e-notation <-> `\times 10^`, an exact fraction <-> its decimal, `\frac` -> `\dfrac`, ...) and must still be accepted
against itself; this catches answer forms the grader cannot read, which the solution check (gold vs gold) cannot see.
Reported per benchmark as `rewritten` / `rewrite_ok`, with its own threshold (every rewrite must pass, as both forms
are equal by construction).

Prints a table, then each disagreement with its reason; exits 1 when a benchmark is below a threshold, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hacrl_exp.config.flags import MAX_WORKERS, check_number
from hacrl_exp.errors import ConfigError, exit_on_bad_input
from hacrl_exp.evaluation.data import load_problems
from hacrl_exp.evaluation.markdown import markdown_table, shorten
from hacrl_exp.evaluation.spec import BenchmarkSpec, known_benchmarks, load_benchmark
from hacrl_exp.rewards import Grader
from hacrl_exp.rewards.extract import GOLD_EXTRACTORS
from hacrl_exp.rewards.rewrite import rewrite
from hacrl_exp.tasks.base import Problem
from hacrl_exp.tasks.math import DataError, gold_answer, question_text


@dataclass
class Disagreement:
    """A gold solution the grader did not accept: why, the gold answer, and what was extracted."""

    id: str
    reason: str
    answer: str
    extracted: list[str]


@dataclass
class GoldAgreement:
    """Agreement of one benchmark's gold solutions with its gold answers."""

    benchmark: str
    rows: int
    agreed: int
    threshold: float
    seconds: float
    skipped: int = 0
    """Rows without a solution (not counted)."""
    reasons: dict[str, int] = field(default_factory=dict)
    disagreements: list[Disagreement] = field(default_factory=list)
    quirks: int = 0
    """Disagreeing rows on the benchmark's reviewed quirk list: left out of `agreement`, counted here."""
    rewritten: int = 0
    """Gold answers that have a second form (`hacrl_exp.rewards.rewrite`)."""
    rewrite_ok: int = 0
    """Of those, second forms the grader accepted against the gold answer."""
    rewrite_failures: list[Disagreement] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        """agreed / (rows − reviewed quirks); `raw_agreement` keeps every row."""
        counted = self.rows - self.quirks
        return self.agreed / counted if counted else float("nan")

    @property
    def raw_agreement(self) -> float:
        return self.agreed / self.rows if self.rows else float("nan")

    @property
    def passed(self) -> bool:
        return self.rows > 0 and self.agreement >= self.threshold and self.rewrite_ok == self.rewritten


def gold_text(spec: BenchmarkSpec, problem: Problem) -> str:
    """The benchmark's gold text template filled with the row's fields (solution, answer, answer_raw, ...)."""
    fields = {**problem.meta, "solution": problem.solution, "answer": problem.answer, "id": problem.id}
    try:
        return spec.gold.text.format_map(fields)
    except KeyError as exc:
        raise DataError(f"benchmark {spec.name}: gold.text needs field {exc} that row {problem.id!r} lacks") from None


def gold_candidates(spec: BenchmarkSpec, problem: Problem) -> list[str]:
    """Candidate answers of a row's gold text, and of each text in its `gold.more_texts` list field."""
    extract = GOLD_EXTRACTORS[spec.gold.extractor]
    more = problem.meta.get(spec.gold.more_texts) if spec.gold.more_texts else None
    texts = [gold_text(spec, problem), *(t for t in more or [] if isinstance(t, str))]
    return list(dict.fromkeys(c for text in texts for c in extract(text)))


def check_gold(spec: BenchmarkSpec, problems: list[Problem], grader: Grader) -> GoldAgreement:
    """Grade each problem's gold text, and each gold answer's rewrite (see module docstring), with the one grader."""
    started = time.perf_counter()
    usable = [p for p in problems if p.solution]
    candidates = [gold_candidates(spec, p) for p in usable]
    flat = [(i, c) for i, cands in enumerate(candidates) for c in cands if len(cands) == 1 or _plausible(c, usable[i])]
    grades = grader.grade_answers(
        [c for _, c in flat],
        [gold_answer(usable[i], spec.grader) for i, _ in flat],
        compare=spec.grader,
        questions=[question_text(usable[i]) for i, _ in flat],
    )
    reasons_of: list[list[str]] = [[] for _ in usable]
    for (i, _), grade in zip(flat, grades):
        reasons_of[i].append(grade.reason)
    agreement = GoldAgreement(spec.name, len(usable), 0, spec.gold.threshold, 0.0, skipped=len(problems) - len(usable))
    quirks = dict(spec.gold.quirks)
    for problem, cands, reasons in zip(usable, candidates, reasons_of):
        if "correct" in reasons:
            agreement.agreed += 1
            continue
        if problem.id in quirks:
            agreement.quirks += 1
            agreement.disagreements.append(
                Disagreement(problem.id, "quirk: " + quirks[problem.id], problem.answer, cands)
            )
            continue
        reason = next((r for r in ("timeout", "grader_error", "wrong") if r in reasons), "no_answer")
        agreement.reasons[reason] = agreement.reasons.get(reason, 0) + 1
        agreement.disagreements.append(Disagreement(problem.id, reason, problem.answer, cands))
    check_rewrites(agreement, problems, grader, spec.grader)
    agreement.seconds = time.perf_counter() - started
    return agreement


def check_rewrites(agreement: GoldAgreement, problems: list[Problem], grader: Grader, compare: str) -> None:
    """Grade every gold answer's second form (`rewrite`) against the gold answer, without the question (a rewrite
    may change the form a question asks for: the check is about reading forms); failures are kept in `agreement`.
    Exact-match benchmarks (arithmetic) have no second form."""
    if compare == "exact":
        return
    pairs = [(p, form) for p in problems if (form := rewrite(p.meta.get("answer_raw", p.answer))) is not None]
    golds = [gold_answer(p, compare) for p, _ in pairs]
    grades = grader.grade_answers([form for _, form in pairs], golds, compare=compare)
    agreement.rewritten = len(pairs)
    for (problem, form), grade in zip(pairs, grades):
        if grade.reward == 1.0:
            agreement.rewrite_ok += 1
        else:
            agreement.rewrite_failures.append(Disagreement(problem.id, grade.reason, problem.answer, [form]))


_COMMANDS = re.compile(r"\\(?:text|mathrm|operatorname)\s*\{[^{}]*\}|\\[A-Za-z]+")


def _letters(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z]", _COMMANDS.sub(" ", text)))


def _plausible(candidate: str, problem: Problem) -> bool:
    """Cheap filter for multi-candidate extractors: a candidate naming a variable the gold answer lacks cannot
    equal it, so math-verify is not asked (it is counted as not agreeing)."""
    return _letters(candidate) <= _letters(problem.answer)


def gold_benchmarks() -> list[str]:
    """Benchmarks whose YAML defines a gold check."""
    return [name for name in known_benchmarks() if load_benchmark(name).gold is not None]


def run(args: argparse.Namespace) -> list[GoldAgreement]:
    """Load, check and print every requested benchmark; returns the agreements."""
    names = args.benchmarks or [n for n in gold_benchmarks() if not n.endswith(("_sampled", "_bare"))]
    specs = [load_benchmark(n) for n in names]
    for spec in specs:
        if spec.gold is None:
            raise ConfigError(f"benchmark {spec.name} has no gold block; choose from {gold_benchmarks()}")
    data = [load_problems(s, args.data_dir, args.limit, args.source) for s in specs]  # bad data fails before grading
    agreements = []
    with Grader(args.timeout, args.workers) as grader:
        grader.start()
        for spec, problems in zip(specs, data):
            agreements.append(check_gold(spec, problems, grader))
            last = agreements[-1]
            print(f"{spec.name}: {last.agreed}/{last.rows} in {last.seconds:.1f} s", flush=True)
    print_agreements(agreements, args.show)
    if args.json:
        payload = [{**asdict(r), "agreement": r.agreement, "passed": r.passed} for r in agreements]
        Path(args.json).write_text(json.dumps(payload, indent=1))
    return agreements


def print_agreements(agreements: list[GoldAgreement], show: int) -> None:
    """The agreement table, then up to `show` disagreements per benchmark."""
    rows = [
        [
            r.benchmark,
            r.rows,
            r.agreed,
            f"{100 * r.agreement:.2f}%",
            f"{r.quirks} ({100 * r.raw_agreement:.2f}%)",
            f"{100 * r.threshold:.0f}%",
            f"{r.rewrite_ok}/{r.rewritten}",
            "pass" if r.passed else "FAIL",
            " ".join(f"{k}={v}" for k, v in sorted(r.reasons.items())) or "-",
            f"{r.seconds:.1f}",
        ]
        for r in agreements
    ]
    headers = [
        "benchmark",
        "rows",
        "agree",
        "agreement",
        "reviewed quirks (raw agreement)",
        "threshold",
        "rewrites accepted",
        "result",
        "disagreements",
        "seconds",
    ]
    print("\n" + markdown_table(headers, rows))
    for r in agreements:
        if r.disagreements and show:
            print(f"\n{r.benchmark}: {len(r.disagreements)} disagreements (first {min(show, len(r.disagreements))})")
            for d in r.disagreements[:show]:
                seen = "; ".join(shorten(c, 40) for c in d.extracted[:3]) or "(nothing extracted)"
                print(f"  {d.id}  {d.reason:<9} gold={shorten(d.answer, 50)}  extracted={seen}")
        for d in r.rewrite_failures[:show]:
            gold = shorten(d.answer, 50)
            print(f"  {r.benchmark} rewrite {d.id}  {d.reason:<9} gold={gold}  rewritten={d.extracted[0]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hacrl_exp.evaluation.gold", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="JSONL folder (default: $HACRL_DATA_DIR)")
    parser.add_argument("--benchmarks", nargs="*", default=None, help="default: every benchmark with a gold block")
    parser.add_argument("--limit", type=int, default=None, help="first N rows of each benchmark")
    parser.add_argument("--source", default="local", choices=["local", "hf", "auto"])
    parser.add_argument("--workers", type=int, default=2, help="grader worker processes")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per answer")
    parser.add_argument("--show", type=int, default=20, help="disagreements listed per benchmark")
    parser.add_argument("--json", default=None, help="also write the agreements to this JSON file")
    args = parser.parse_args(argv)
    with exit_on_bad_input(ConfigError, DataError):
        check_number("--limit", args.limit, 1, 10_000_000)
        check_number("--workers", args.workers, 1, MAX_WORKERS)
        check_number("--timeout", args.timeout, 0.1, 600)
        check_number("--show", args.show, 0, 1_000_000)
        agreements = run(args)
    failed = [r.benchmark for r in agreements if not r.passed]
    if failed:
        print(f"\nFAIL: below threshold: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
