"""Graders: compare extracted answers with gold answers. The math grader is the training reward's MathGrader.

- `math_verify`: MathGrader (math-verify in worker processes, per-answer timeout, reasons). Two plain decimal numbers
  with at most 6 decimals are compared here exactly, which is math-verify's verdict without the round trip.
- `numeric`: both sides read as numbers (`normalize_number`: thousands separators, `$`, units dropped) and compared
  exactly; when either side is not a plain number it falls back to `math_verify`. GSM8K uses it.
- `exact`: string equality after stripping (the arithmetic tiers).
Reasons: correct, wrong, no_answer (nothing extracted), timeout, grader_error. Timeouts are never fatal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hacrl_exp.evaluation.extract import normalize_number, numbers_equal
from hacrl_exp.rewards.math_grader import MathGrader
from hacrl_exp.tasks.base import Grade

_PLAIN = re.compile(r"-?\d+(?:\.\d{1,6})?")
_PERCENT = re.compile(r"\s*\\?%\s*$")
_NO_ANSWER = Grade(0.0, "no_answer")


def _verdict(ok: bool) -> Grade:
    return Grade(1.0, "correct") if ok else Grade(0.0, "wrong")


class Scorer:
    """Grades extracted answers with a benchmark's grader; owns a MathGrader unless one is passed in."""

    def __init__(self, grader: MathGrader | None = None, *, timeout_s: float = 5.0, workers: int = 1):
        """grader: a shared MathGrader (e.g. the training task's); otherwise one is built and closed by `close`."""
        self._owns = grader is None
        self.math = grader or MathGrader(timeout_s=timeout_s, n_workers=workers)

    def close(self) -> None:
        """Stop the MathGrader's workers if this Scorer built it."""
        if self._owns:
            self.math.close()

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def grade(self, grader: str, answers: Sequence[str | None], golds: Sequence[str]) -> list[Grade]:
        """One Grade per (extracted answer, gold answer) pair; None answers are 'no_answer'."""
        if len(answers) != len(golds):
            raise ValueError(f"grade got {len(answers)} answers for {len(golds)} gold answers")
        if grader == "exact":
            return [_NO_ANSWER if a is None else _verdict(a.strip() == g.strip()) for a, g in zip(answers, golds)]
        if grader not in ("numeric", "math_verify"):
            raise ValueError(f"grader {grader!r} is unknown; use math_verify, numeric or exact")
        answers, golds = list(answers), list(golds)  # percent answers are rewritten in place below
        out: list[Grade | None] = [None] * len(answers)
        todo: list[int] = []
        for i, (answer, gold) in enumerate(zip(answers, golds)):
            if answer is None:
                out[i] = _NO_ANSWER
                continue
            # math-verify reads `62.5\%` as text: a trailing percent sign is dropped on both sides (it is optional)
            answer, gold = _PERCENT.sub("", answer) or answer, _PERCENT.sub("", gold) or gold
            answers[i], golds[i] = answer, gold
            a, g = (normalize_number(answer), normalize_number(gold)) if grader == "numeric" else (answer, gold)
            if a is not None and g is not None and (grader == "numeric" or _plain(a) and _plain(g)):
                out[i] = _verdict(numbers_equal(a, g))
            else:
                todo.append(i)
        if todo:
            boxes = ["\\boxed{" + answers[i] + "}" for i in todo]
            for i, grade in zip(todo, self.math.grade(boxes, [golds[i] for i in todo])):
                out[i] = grade
        return out  # type: ignore[return-value]


def _plain(s: str) -> bool:
    return _PLAIN.fullmatch(s.strip()) is not None
