"""Forms a question asks for, and answers that ignore them: what a careful human grader checks beyond the value.

An answer equal in value to the gold answer is still marked wrong when the question fixes a form it does not use
(docs/evaluation.md, "Answer forms"). `requested_forms(question)` reads the request from the question's text;
`ignores_request(answer, gold, forms)` says whether an answer (as extracted, before `canonical`) ignores it:

| the question says | an answer that ignores it |
|---|---|
| "common fraction", "simplest fraction", "improper fraction" | a decimal, a repeating decimal or a mixed number |
| "simplest form", "lowest terms", "simplified fraction" | a fraction whose numerator and denominator share a factor |
| "rationalize the denominator", "rational denominator" | a radical in a denominator |
| "Factor ..." | an expanded product (the gold has brackets, the answer none) |
| "in the form ..." | brackets the gold lacks, or no bracket where the gold's answer is a tuple; a function (`\\cos`, `\\ln`, ...) other than the gold's; `x = ...` when the gold is `y = ...` |
| "as a decimal", "nearest tenth / hundredth / ...", "decimal places" | a fraction |
| "mixed number" | anything but a mixed number |
| "simplest radical form", "simplify" | a radical with a square factor left inside (when the gold has none) |
| "interval notation" | an inequality, or a set difference (`\\setminus`) |
| "scientific notation", "format ... \\times 10^", "in the form ... \\times 10^" | no power of ten |
| "A > 0" (an equation's normal form) | an equation whose first coefficient is negative |
| two named quantities ("determine both $a$ and $b$") or "solve the system", and no "all" | a list in another order (`names` orders labelled items) |

With no question (None) nothing is requested. Questions are trusted dataset text; the regexes are linear anyway.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from hacrl_exp.rewards.extract import RELATION_OPERATOR

_FRACTION = re.compile(
    r"common fraction|simplest fraction|improper fraction|fraction in (?:simplest|lowest) (?:form|terms)", re.I
)
_REDUCED = re.compile(
    r"simplest form|lowest terms|simplified fraction|simplify|common fraction|simplest fraction", re.I
)
_RATIONAL_DENOMINATOR = re.compile(r"rationali[sz]e the denominator|rational denominator", re.I)
_FACTOR = re.compile(r"(?:^|[.?!]\s+)Factor\b|\bcompletely factor|\bfactor completely", re.I)
_FORM_FIXED = re.compile(r"\b(?:in|of) the form\b", re.I)
_SYSTEM = re.compile(r"solve the system|system of equations", re.I)
_DECIMAL = re.compile(
    r"as a decimal|decimal to|decimal places?|nearest (?:tenth|hundredth|thousandth|ten-thousandth)|decimal form", re.I
)
_MIXED = re.compile(r"(?<!not )(?<!no )\bmixed number", re.I)  # "(not mixed numbers or decimals)" asks the opposite
_RADICAL = re.compile(r"simplest radical form|\bsimplify\b", re.I)
_INTERVAL = re.compile(r"interval notation", re.I)
_SCIENTIFIC = re.compile(
    r"scientific notation|(?:format|form|express|write|give)[^.?]{0,80}(?:\\times|\\cdot|\bx)\s*10\s*\^", re.I
)
_LEADING_POSITIVE = re.compile(r"\bA\s*>\s*0")
_ALL = re.compile(r"\ball\b|separated by commas|\broots\b|\bsolutions\b|unordered", re.I)
_TWO_NAMED = re.compile(r"\$\s*([A-Za-z])\s*\$\s*,?\s*and\s*\$\s*([A-Za-z])\s*\$")
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")

_DECIMAL_NUMBER = re.compile(r"\d\.\d|(?<![\d}])\.\d|\\overline")
_MIXED_NUMBER = re.compile(r"^-?\s*\d+\s*\\[dt]?frac\s*\{?\d+\}?\s*\{?\d+\}?$")
_LAST_UNIT = re.compile(r"(?:\s|\\[,;:! ])*\\(?:text|mbox|mathrm)\s*\{[^{}]{0,60}\}(?:\s|\\[,;:! ])*$")
_FRACTION_FORM = re.compile(r"\\[dt]?frac|/")
_RADICAL_ARG = re.compile(r"\\sqrt\s*\{\s*(\d+)\s*\}|\\sqrt\s*(\d)")
_POWER_OF_TEN = re.compile(r"10\s*\^|\d[eE][-+]?\d")
_INTEGER = re.compile(r"-?\d+")
_NOT_INTERVAL = re.compile(RELATION_OPERATOR.pattern + r"|\\setminus")  # `x \lt 3`, `x >= 5` too
_INTEGER_FRACTION = re.compile(r"\\frac\s*\{\s*(\d{1,18})\s*\}\s*\{\s*(\d{1,18})\s*\}")
_RADICAL_DENOMINATOR = re.compile(r"\\frac\s*\{[^{}]*\}\s*\{[^{}]*\\sqrt")
_FUNCTIONS = re.compile(r"\\(sin|cos|tan|cot|sec|csc|ln|log|exp|sinh|cosh|tanh|arcsin|arccos|arctan)(?![A-Za-z])")
_LEFT_SIDE = re.compile(r"^\s*([A-Za-z])\s*=")
_LABEL = re.compile(r"^\s*([A-Za-z])\s*=\s*(.+)$", re.S)


@dataclass(frozen=True)
class Requested:
    """What a question asks of the answer's form (module table)."""

    fraction: bool = False
    decimal: bool = False
    mixed: bool = False
    radical: bool = False
    interval: bool = False
    scientific: bool = False
    leading_positive: bool = False
    reduced: bool = False
    rational_denominator: bool = False
    factored: bool = False
    form_fixed: bool = False
    ordered: bool = False
    """A comma list answers named quantities in the order the question names them (not a set of solutions)."""
    names: tuple[str, ...] = ()
    """Those quantities' names, in the question's order (`b = 0.45, a = 1.68` is read as a, b)."""


NOTHING = Requested()


def requested_forms(question: str | None) -> Requested:
    """The forms `question` fixes; NOTHING when there is no question."""
    if not question:
        return NOTHING
    tail = _SENTENCE_END.split(question.strip())[-1]
    named = _TWO_NAMED.search(tail)
    ordered = bool(named or _SYSTEM.search(question)) and not _ALL.search(question)
    return Requested(
        fraction=bool(_FRACTION.search(question)),
        decimal=bool(_DECIMAL.search(question)),
        mixed=bool(_MIXED.search(question)),
        radical=bool(_RADICAL.search(question)),
        interval=bool(_INTERVAL.search(question)),
        scientific=bool(_SCIENTIFIC.search(question)),
        leading_positive=bool(_LEADING_POSITIVE.search(question)),
        reduced=bool(_REDUCED.search(question)),
        rational_denominator=bool(_RATIONAL_DENOMINATOR.search(question)),
        factored=bool(_FACTOR.search(question)),
        form_fixed=bool(_FORM_FIXED.search(question)),
        ordered=ordered,
        names=named.groups() if ordered and named else (),
    )


def without_units(answer: str) -> str:
    """`answer` without up to 4 trailing `\\text{…}` / `\\mbox{…}` / `\\mathrm{…}` units and their spacing, so
    that `6\\frac{1}{6}\\text{ feet}` reads as a mixed number. Only the last 120 characters are searched: bounded
    work on untrusted model output."""
    number = answer.strip()
    for _ in range(4):
        cut = max(0, len(number) - 120)
        unit = _LAST_UNIT.search(number, cut)
        if unit is None:
            break
        number = number[: unit.start()]
    return number.strip()


def ignores_request(answer: str, canonical_answer: str, gold: str, forms: Requested) -> bool:
    """True when `answer` ignores a form the question asks for and the gold answer uses. Rules about how a number
    is written read the answer as extracted; rules about fractions and radicals read its canonical form (units gone,
    so `\\mathrm{m/s}` is no fraction)."""
    if forms == NOTHING:
        return False
    number = without_units(answer)
    if forms.mixed and not _MIXED_NUMBER.match(number) and not _INTEGER.fullmatch(number):
        return True
    if forms.fraction and not forms.decimal and (_DECIMAL_NUMBER.search(answer) or _MIXED_NUMBER.match(number)):
        return True
    if (
        forms.decimal
        and not forms.fraction
        and _FRACTION_FORM.search(canonical_answer)
        and not _FRACTION_FORM.search(gold)
    ):
        return True
    if forms.radical and _unsimplified_radical(canonical_answer) and not _unsimplified_radical(gold):
        return True
    if forms.interval and _NOT_INTERVAL.search(answer) and not _NOT_INTERVAL.search(gold):
        return True
    if forms.reduced and any(math.gcd(int(a), int(b)) > 1 for a, b in _INTEGER_FRACTION.findall(canonical_answer)):
        return True
    if forms.rational_denominator and _RADICAL_DENOMINATOR.search(canonical_answer):
        return True
    if (forms.factored or forms.form_fixed) and "(" in canonical_answer and "(" not in gold:
        return True
    if forms.factored and "(" in gold and "(" not in canonical_answer:
        return True
    if (
        forms.form_fixed
        and _FUNCTIONS.findall(gold)
        and set(_FUNCTIONS.findall(gold)) != set(_FUNCTIONS.findall(canonical_answer))
    ):
        return True
    if forms.form_fixed and gold[:1] in "([" and canonical_answer.lstrip()[:1] != gold[:1]:
        return True
    if (
        forms.form_fixed
        and _LEFT_SIDE.match(gold)
        and (_LEFT_SIDE.match(canonical_answer) or [None, None])[1] != _LEFT_SIDE.match(gold)[1]
    ):
        return True
    if forms.scientific and _POWER_OF_TEN.search(gold) and not _POWER_OF_TEN.search(answer):
        return True
    return forms.leading_positive and "=" in answer and answer.lstrip().startswith("-")


def in_question_order(items: list[str], names: tuple[str, ...]) -> list[str]:
    """Items labelled `v = value` with the question's names, as values in the question's order; else unchanged."""
    labelled = [_LABEL.match(item) for item in items]
    if len(items) != len(names) or not all(labelled) or {m.group(1) for m in labelled} != set(names):
        return items
    value = {m.group(1): m.group(2).strip() for m in labelled}
    return [value[name] for name in names]


def _unsimplified_radical(text: str) -> bool:
    return any(_has_square_factor(int(a or b)) for a, b in _RADICAL_ARG.findall(text))


def _has_square_factor(n: int) -> bool:
    """n has a square factor > 1 (so sqrt(n) is not in simplest radical form); bounded for hostile numbers."""
    if n > 10**8:
        return False
    k = 2
    while k * k <= n:
        if n % (k * k) == 0:
            return True
        k += 1
    return False
