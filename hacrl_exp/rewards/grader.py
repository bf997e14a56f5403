"""The one grader: every reward and every benchmark verdict in hacrl_exp is `Grader.grade` (spec §1.1).

Training rewards (`MathTask.grade`, `ArithmeticTask.grade`), in-training and stand-alone evaluation
(`hacrl_exp.evaluation.runner`), the gold-agreement check, the lm-eval export and `python -m hacrl_exp.grade` all call
it, so a response earns the same verdict wherever it is graded. For one (response, gold) pair:

1. **Extract** the final answer with a named extractor (`EXTRACTORS`: the last `\\boxed{}` for math, the text after
   the last `|` for arithmetic scratchpads, ...) from the last `max_chars` characters. Nothing, or an empty box, is
   reason 'no_answer'. Under `math`, a gold of several parts reads the boxes that end the response together
   (`\\boxed{(2,2)} and \\boxed{(6,2)}`: `hacrl_exp.rewards.boxed.final_boxes`), joined by commas.
2. **Compare** with the gold answer under a named rule (`COMPARES`):
   - `exact`: stripped strings are equal (the arithmetic tiers, whose answers are digit strings).
   - `math`: (a) under the `requested` policy (`FORMS`, the default) an answer that ignores a form the question asks
     for is wrong (`hacrl_exp.rewards.requested`: a decimal where a common fraction is asked, an inequality where
     interval notation is asked, ...); under `value` that check is skipped; (b) the answer is
     brought to canonical form (`hacrl_exp.rewards.forms.canonical`; gold answers already are, from load time);
     equal compact strings are correct; (c) a gold variable the answer lacks is wrong (`\\frac{37}{4} m` vs
     `\\frac{37}{4}`); (d) numbers (decimals, integer fractions, `a\\times10^{b}`) and flat lists of them are
     compared exactly (`1.60` = `1.6` = `\\frac{8}{5}`, `0.33` ≠ `1/3`, `1,2` = `2,1`, `(1,2)` ≠ `(2,1)`), and so are
     answers in words (`\\text{East}` = `\\text{east}`); (e) a gold in scientific notation (`8.7\\times10^{8}`)
     accepts a number that rounds to it at its significant figures, given with at least as many
     (`8.71\\times10^{8}`, `\\frac{1}{360000}` for `2.7778\\times10^{-6}`); (f) anything else goes to math-verify
     in worker processes with a per-pair timeout (`VerifyPool`), cached per pair. When the question names quantities
     in order ("determine both $a$ and $b$"), comma lists are compared element by element.

   - `verl`: the paper's reward (hacpo-spec §1.1), verl's `math.compute_score` (`hacrl_exp.rewards.verl_math`): verl's
     own last-box reading of the whole response (the extractor must be `boxed`; `max_chars` does not apply), then
     `strip_string` on both sides and string equality. Gold answers are compared as given: pass them as written
     (`hacrl_exp.tasks.math.gold_answer`), not in canonical form. No question forms, no math-verify.

Reasons: 'correct', 'wrong', 'no_answer', 'timeout', 'grader_error'. Reward is 1.0 for 'correct', else 0.0. Under
`verl` a reward is 1.0 exactly when verl's `compute_score` is (reasons 'correct', 'wrong' or 'no_answer').

Every Grade carries the verdict under both policies (`Grade.reason_under`), decided in one pass by `Decision.reason`, so
an evaluation reports the other policy's accuracy beside the one it graded under.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hacrl_exp.rewards import verl_math
from hacrl_exp.rewards.boxed import final_boxes
from hacrl_exp.rewards.extract import ANSWER_EXTRACTORS
from hacrl_exp.rewards.forms import canonical, label_value, several_parts, split_top_level, unlabelled
from hacrl_exp.rewards.numbers import (
    exact_values_equal,
    hundredth,
    is_number,
    matches_scientific,
    text_answers_equal,
    variables_missing,
)
from hacrl_exp.rewards.requested import ignores_request, in_question_order, requested_forms
from hacrl_exp.rewards.verify_pool import VerifyPool

COMPARES = ("math", "exact", "verl")
"""Comparison rules; see the module docstring."""
REWARDS = ("math_verify", "verl")
"""`task.reward` choices for math tasks, each the name of a comparison rule: `math_verify` (= `math`, the default) or
`verl` (the paper's reward)."""
FORMS = ("requested", "value")
"""Grading policies of the `math` rule (`forms=`; `task.grader_forms`, evaluate's `grader.forms`, grade's `--forms`).
`requested` (the default): an answer that ignores a form its question asks for is wrong (`\\sqrt{117}` under "simplest
radical form", `0.625` under "common fraction"), as a careful human grader marks it. `value`: the value alone decides,
as graders built on math-verify or Minerva-style equivalence do: that check is skipped, and a percent answer is also
read as its value / 100 when the question asks for a fraction or a decimal; every other rule stays (a list in another
order than the question names its quantities is still wrong: the values differ). `exact` and `verl` read no form, so
both policies give the same verdict under them."""
COMPARE_ALIASES = {"math_verify": "math", "numeric": "math"}
"""Names benchmark YAMLs used before the grader became one path; they mean `math`."""
EXTRACTORS: dict[str, Callable[[str], str | None]] = ANSWER_EXTRACTORS
"""Answer extractors by name (`hacrl_exp.rewards.extract`)."""

_CACHE_SIZE = 100_000
_SPACE = re.compile(r"\s+")
_PERCENT = re.compile(r"(?:\\%|%)\s*\}?\s*$")


@dataclass(frozen=True)
class Grade:
    """The verdict on one response: reward 1.0 or 0.0, why, and the answer the grader read from it."""

    reward: float
    reason: str = "correct"
    extracted: str | None = field(default=None, compare=False)
    """What the extractor read (None: nothing); not part of equality, which is about the verdict."""
    forms: str = field(default=FORMS[0], compare=False)
    """The policy (`FORMS`) that `reward` and `reason` follow."""
    other_reason: str | None = field(default=None, compare=False)
    """The reason under the other policy; None when it is `reason` (always, under the rules that read no form)."""

    def reason_under(self, forms: str) -> str:
        """The reason under policy `forms` (`FORMS`)."""
        if resolve_forms(forms) == self.forms or self.other_reason is None:
            return self.reason
        return self.other_reason

    def reward_under(self, forms: str) -> float:
        """The reward under policy `forms`: 1.0 for 'correct', else 0.0."""
        return 1.0 if self.reason_under(forms) == "correct" else 0.0


def resolve_compare(name: str) -> str:
    """The comparison rule a grader name means (`math_verify` and `numeric` are old names of `math`)."""
    name = COMPARE_ALIASES.get(name, name)
    if name not in COMPARES:
        raise ValueError(f"grader {name!r} is unknown; use one of {list(COMPARES)}")
    return name


def resolve_forms(name: str) -> str:
    """`name` when it is a grading policy (`FORMS`); ValueError naming the choices otherwise."""
    if name not in FORMS:
        raise ValueError(f"grader forms {name!r} is unknown; use one of {list(FORMS)}")
    return name


class Grader:
    """Extract, normalise and compare final answers (module docstring); owns its math-verify worker processes."""

    def __init__(
        self,
        timeout_s: float = 5.0,
        workers: int = 1,
        max_chars: int = 20000,
        *,
        memory_limit_mb: int | None = 4096,
    ):
        """timeout_s: seconds one math-verify comparison may take; workers: math-verify processes (started on first
        need); max_chars: only this tail of a response is searched for the answer (not under compare='verl', which reads
        the whole response as verl does); memory_limit_mb: per worker."""
        if max_chars < 1:
            raise ValueError(f"Grader needs max_chars >= 1; got {max_chars}.")
        self.max_chars = int(max_chars)
        self.pool = VerifyPool(timeout_s, workers, memory_limit_mb=memory_limit_mb)
        self._cache: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker processes; a later `grade` starts fresh ones."""
        self.pool.close()

    def start(self) -> None:
        """Start the math-verify workers now and wait until they are ready."""
        self.pool.start()

    @property
    def worker_pids(self) -> set[int]:
        """Process ids of the live math-verify workers."""
        return self.pool.worker_pids

    def extract(self, response: str | None, extractor: str = "boxed") -> str | None:
        """The final answer `extractor` reads from the last `max_chars` characters of `response`; None if none."""
        if not isinstance(response, str):
            return None
        return EXTRACTORS[extractor](response[-self.max_chars :]) or None

    def grade(
        self,
        responses: Sequence[str | None],
        golds: Sequence[str],
        *,
        extractor: str = "boxed",
        compare: str = "math",
        questions: Sequence[str | None] | None = None,
        forms: str = FORMS[0],
    ) -> list[Grade]:
        """One Grade per (response, gold answer) at the same index. Gold answers are expected in canonical form
        (`normalize_gold`, which every loader applies; a raw gold is brought to it here by the same idempotent rules).
        `questions`: the problem texts, for the forms they ask for (None: no form is checked). `forms`: the policy the
        rewards follow (`FORMS`); each Grade also holds the other's verdict. Never raises or hangs on hostile text."""
        if extractor not in EXTRACTORS:
            raise ValueError(f"answer extractor {extractor!r} is unknown; use one of {sorted(EXTRACTORS)}")
        if resolve_compare(compare) == "verl":
            if extractor != "boxed":
                raise ValueError(f"compare='verl' reads the last box itself; use extractor='boxed', not {extractor!r}")
            answers = [verl_math.read_answer(r) if isinstance(r, str) else None for r in responses]
        else:
            answers = [self.extract(r, extractor) for r in responses]
            if extractor == "boxed" and resolve_compare(compare) == "math" and len(golds) == len(answers):
                answers = [self._boxes_together(r, a, g) for r, a, g in zip(responses, answers, golds)]
        return self.grade_answers(answers, golds, compare=compare, questions=questions, forms=forms)

    def _boxes_together(self, response: str | None, answer: str | None, gold: str) -> str | None:
        """For a gold of several parts, the boxes that end the response together (`final_boxes`), joined by commas:
        `\\boxed{(2,2)} and \\boxed{(6,2)}` answers `(2,2),(6,2)`. Else (one box, a gold of one part) `answer`."""
        if answer is None or not several_parts(gold):
            return answer
        boxes = final_boxes(response[-self.max_chars :])
        return ", ".join(boxes) if len(boxes) > 1 else answer

    def grade_answers(
        self,
        answers: Sequence[str | None],
        golds: Sequence[str],
        *,
        compare: str = "math",
        questions: Sequence[str | None] | None = None,
        forms: str = FORMS[0],
    ) -> list[Grade]:
        """Step 2 alone, for answers already extracted (the gold-agreement check); None is 'no_answer'."""
        questions = [None] * len(answers) if questions is None else questions
        if not len(answers) == len(golds) == len(questions):
            raise ValueError(
                f"grade got {len(answers)} answers for {len(golds)} gold answers and {len(questions)} questions; "
                "pass one of each per answer."
            )
        compare, forms = resolve_compare(compare), resolve_forms(forms)
        other = next(f for f in FORMS if f != forms)
        decisions: list[str | Decision] = []
        for answer, gold, question in zip(answers, golds, questions):
            if answer is None:
                decisions.append("no_answer")
            elif compare == "exact":
                decisions.append(_verdict(answer.strip() == gold.strip()))
            elif compare == "verl":
                decisions.append(verl_math.reason(answer, gold))
            else:
                decisions.append(comparisons(answer, gold, question))
        verdicts = self._verdicts({pair for d in decisions if isinstance(d, Decision) for pair in d.pairs()})
        grades = []
        for decision, answer in zip(decisions, answers):
            reason = decision if isinstance(decision, str) else decision.reason(verdicts, forms)
            other_reason = None if isinstance(decision, str) else decision.reason(verdicts, other)
            other_reason = None if other_reason == reason else other_reason
            grades.append(Grade(1.0 if reason == "correct" else 0.0, reason, answer, forms, other_reason))
        return grades

    def _verdicts(self, pairs: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The reason for each (canonical answer, gold): settled here when the strings do, else by math-verify."""
        out = {pair: _decide(*pair) for pair in pairs}
        todo = [pair for pair, reason in out.items() if reason is None]
        if todo:
            with self._lock:
                unknown = [p for p in todo if p not in self._cache]
                for pair, reason in zip(unknown, self.pool.verify(unknown)):
                    out[pair] = reason
                    if reason in ("correct", "wrong"):  # timeouts depend on load: never remembered
                        self._remember(pair, reason)
                for pair in todo:
                    out[pair] = out[pair] or self._cache[pair]
        return out

    def _remember(self, pair: tuple[str, str], reason: str) -> None:
        self._cache[pair] = reason
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)


Comparison = tuple[str, str]
"""(canonical answer, gold): settled by `_decide` or math-verify."""


@dataclass(frozen=True)
class Decision:
    """How the `math` rule decides one answer under both policies (`FORMS`): alternatives, each a tuple of comparisons
    that must all hold (the answer is correct when one alternative holds; none: wrong)."""

    alternatives: tuple[tuple[Comparison, ...], ...]
    ignores_form: bool = False
    """The answer ignores a form the question asks for (`hacrl_exp.rewards.requested.ignores_request`)."""
    value_alternatives: tuple[tuple[Comparison, ...], ...] = ()
    """Alternatives the `value` policy adds: a percent answer read as its value / 100 where a form is asked."""

    def pairs(self) -> set[Comparison]:
        """Every comparison either policy needs."""
        return {pair for alt in self.alternatives + self.value_alternatives for pair in alt}

    def reason(self, verdicts: dict[Comparison, str], forms: str) -> str:
        """The reason under policy `forms`, given each comparison's verdict: the one place the policies differ."""
        if forms == "requested" and self.ignores_form:
            return "wrong"
        alternatives = self.alternatives + (self.value_alternatives if forms == "value" else ())
        return _combine(alternatives, verdicts) if alternatives else "wrong"


def comparisons(answer: str, gold: str, question: str | None) -> Decision:
    """How the `math` rule decides one answer: whether it ignores a requested form, and alternatives, each a tuple of
    (canonical answer, gold) comparisons that must all hold; the answer is correct when one alternative holds.

    Alternatives: the answer itself; for a percent answer, also its value / 100 (`50\\%` for a probability of
    `\\frac12`; only under the `value` policy when the question asks for a fraction or a decimal). Lists: labels are
    dropped when the gold's items have none (`a = -2, b = 3` for `-2,3`); a bare answer is compared with the values of
    a gold whose items are all `label = value` (`(3,2)` for `(p,q)=(3,2)`), one by one in the gold's order when the
    labels differ (`4, 5` for `AB=4,CD=5`, not `5, 4`); when the question names quantities in order, items are
    compared one by one in that order."""
    forms, mine, gold = requested_forms(question), canonical(answer), canonical(gold)  # idempotent on loaded golds
    ignores = ignores_request(answer, mine, gold, forms)
    items, gold_items = split_top_level(mine), split_top_level(gold)
    if forms.names:
        items = in_question_order(items, forms.names)
    if not any("=" in g for g in gold_items):
        items = [unlabelled(item) for item in items]
    elif not any("=" in item for item in items) and all(map(label_value, gold_items)):
        labels, gold_items = zip(*map(label_value, gold_items))
        gold = ",".join(gold_items)
        if len(labels) > 1 and len(set(labels)) == len(labels):  # distinct labels fix the values' order
            return Decision(_item_by_item(items, gold_items), ignores)
    if forms.ordered and len(gold_items) > 1:
        return Decision(_item_by_item(items, gold_items), ignores)
    mine = ",".join(items)
    alternatives, percent = (((mine, gold),),), ()
    if _PERCENT.search(answer) and is_number(mine):
        percent = (((hundredth(mine), gold),),)
    asks_form = forms.fraction or forms.decimal or "fraction" in (question or "").lower()
    if asks_form:
        return Decision(alternatives, ignores, percent)
    return Decision(alternatives + percent, ignores)


def _item_by_item(items: list[str], gold_items: Sequence[str]) -> tuple[tuple[Comparison, ...], ...]:
    """One alternative comparing the items in order; none (wrong) when their counts differ."""
    return (tuple(zip(items, gold_items)),) if len(items) == len(gold_items) else ()


def _combine(alternatives: tuple[tuple[Comparison, ...], ...], verdicts: dict[Comparison, str]) -> str:
    """'correct' when every comparison of one alternative is; else the first alternative's first failing reason."""
    failing = []
    for alternative in alternatives:
        reasons = [verdicts[pair] for pair in alternative]
        if all(r == "correct" for r in reasons):
            return "correct"
        failing.append(next(r for r in reasons if r != "correct"))
    return failing[0]


def _decide(answer: str, gold: str) -> str | None:
    """The verdict without math-verify when the strings settle it (module docstring, steps b-e), else None."""
    if _SPACE.sub("", answer) == _SPACE.sub("", gold):
        return "correct"
    if not answer:
        return "no_answer"
    if variables_missing(answer, gold):
        return "wrong"
    equal = matches_scientific(answer, gold)
    if equal is None:
        equal = exact_values_equal(answer, gold)
    if equal is None:
        equal = text_answers_equal(answer, gold)
    return None if equal is None else _verdict(equal)


def _verdict(ok: bool) -> str:
    return "correct" if ok else "wrong"
