"""Answer extraction: what a response (or a gold solution, or a dataset field) states as its final answer.

Three registries, each name -> function:
- ANSWER_EXTRACTORS read a model response: `response -> answer or None`.
- GOLD_EXTRACTORS read a gold solution for the gold-agreement check: `text -> candidate answers` (agreement means the
  grader accepts one of them; most extractors give at most one).
- SOURCE_EXTRACTORS derive a field of a Hugging Face row (e.g. GSM8K's answer after `####`): `text -> str or None`.
Response extractors run in linear time on hostile text (`rfind` and brace matching in `boxed.py`); the prose extractor
for (trusted) gold solutions bounds its work by skipping long spans and capping candidates.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hacrl_exp.rewards.boxed import last_boxed

MAX_CHARS = 20000
"""Only this tail of a response is searched (as Grader.max_chars): the final answer ends the response."""

_HASHES = "####"
_UNITS = re.compile(r"\\(?:text|mathrm|mbox|textrm)\s*\{([^{}]*)\}")
_NOISE = re.compile(r"\\[$%]|\\[!,;: ]|[$%]|\{,\}|\\left|\\right|\s+")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")
_TRAILING_WORDS = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+))[A-Za-z]*$")


def normalize_number(text: str | None) -> str | None:
    """`text` as a plain decimal number string, or None when it is not just a number.

    Drops `\\$`, `$`, `%`, `\\%`, thin spaces, `\\text{...}` units, thousands separators (`1,080`, `1{,}080`) and a
    trailing dot or word (`18 dollars`). `\\text{18}` keeps its digits. '1,2' stays a list (None).
    """
    if text is None:
        return None
    s = _UNITS.sub(lambda m: m.group(1) if _NUMBER.fullmatch(m.group(1).strip()) else "", text)
    s = _THOUSANDS.sub("", _NOISE.sub("", s)).rstrip(".")
    m = _TRAILING_WORDS.match(s)
    return m.group(1) if m else None


def boxed(response: str) -> str | None:
    """The last `\\boxed{}` / `\\fbox{}` in the last MAX_CHARS characters; None when absent or empty."""
    return last_boxed(response[-MAX_CHARS:]) or None


def boxed_number(response: str) -> str | None:
    """The last box read as a number (GSM8K); a box that is not a plain number is passed on as written."""
    box = boxed(response)
    return None if box is None else (normalize_number(box) or box)


def after_bar(response: str) -> str | None:
    """Arithmetic scratchpad chains: the text after the last '|' (as ArithmeticTask.extract), None without one."""
    head, bar, tail = response.rpartition("|")
    return tail.strip() if bar else None


def whole_text(response: str) -> str | None:
    """Bare arithmetic answers: the whole stripped response, None when empty."""
    return response.strip() or None


def hashes(text: str) -> str | None:
    """GSM8K: the text after the last `####` line marker, as written (e.g. '1,080'); None without a marker."""
    head, mark, tail = text.rpartition(_HASHES)
    return (tail.strip() or None) if mark else None


def hashes_number(text: str) -> str | None:
    """GSM8K: the number after the last `####`, thousands separators removed ('1,080' -> '1080')."""
    raw = hashes(text)
    return None if raw is None else (normalize_number(raw) or raw)


def before_hashes(text: str) -> str | None:
    """GSM8K: the rationale before the last `####` line."""
    head, mark, _ = text.rpartition(_HASHES)
    return head.rstrip() if mark else None


# ---- gold solutions in prose (OlympiadBench) -------------------------------------------------------------------
_BOLD = re.compile(r"\\(?:mathbf|textbf|boldsymbol|bf)\s*\{([^{}]*)\}")
_SPACED_DIGITS = re.compile(r"(?<=[\d,.]) (?=[\d,.])")
_JUNK_LINES = re.compile(r"^\s*(?:Figure \d+|This page is intentionally left blank|\|.*\|)\s*$", re.M)  # + tables
_ARRAY_BINOMIAL = re.compile(r"\\left\(\\begin\{array\}\{c\}([^{}\\]*)\\\\([^{}\\]*)\\end\{array\}\\right\)")
_IMAGES = re.compile(r"<img_\d+>")
_MATH = re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|(?<!\\)\$(.+?)(?<!\\)\$", re.S)
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\{[a-z*]+\}(?:\{[^{}]*\})?|\\(?:quad|qquad)(?![A-Za-z])")
_SENTENCE = re.compile(r"\n\s*\n|(?<=[.!?])\s+(?=[A-Z(])")
_RELATION = re.compile(r"=|\\in(?![A-Za-z])|\\approx|\\doteq|\\equiv|:")
_PROSE_NUMBER = re.compile(r"(?<![\w.^_])-?\d+(?:\.\d+)?(?![\w])")
_TOP_COMMA = re.compile(
    r",\s*(?=\\?[A-Za-z][^,=]{0,30}(?:=|\\in(?![A-Za-z])))"
)  # `a=2, h=-1`: a comma that starts another relation
_FREE_LETTER = re.compile(r"(?<!\\)\b[A-Za-z]|(?<=[\d}])[A-Za-z]")
RELATION_OPERATOR = re.compile(r"<=|>=|<|>|\\[lg]eq?(?:slant)?(?![A-Za-z])|\\[lg]t(?![A-Za-z])|≤|≥")
"""An order relation in any spelling; `as_interval` splits a span at these."""
_VARIABLE = re.compile(r"[A-Za-z](?:_\{?\w+\}?)?(?:\([A-Za-z]\))?")  # `x`, `k_1`, `a_{n}`, `f(x)` (a range of f)
_UPPER = {"<": ")", "≤": "]"}
_LOWER = {">": "(", "≥": "["}
_FLIP = {"<": ">", "≤": "≥", ">": "<", "≥": "≤"}
_EDGE_PUNCT = " \t\n.,;:"
MAX_STATEMENTS = 40
"""At most this many candidates per gold solution (the last sentences first: a solution ends with its result)."""
MAX_SPAN = 200
"""Longer math spans are derivations, not answers, and can take math-verify past its timeout."""


def _unbold(text: str) -> str:
    """`\\mathbf{1 0 9}` -> `109`: bold answers (ARML style) lose the command and the spaces between digits; a
    binomial typeset as a one-column array becomes `\\binom{a}{b}`."""
    text = _ARRAY_BINOMIAL.sub(lambda m: f"\\binom{{{m.group(1).strip()}}}{{{m.group(2).strip()}}}", text)
    return _BOLD.sub(lambda m: _SPACED_DIGITS.sub("", m.group(1)), text)


def as_interval(span: str) -> str | None:
    """A one-variable inequality as an interval: `a \\leq x < b` -> `[a,b)`, `k<-5` and `5 > k` -> `(-\\infty,5)`,
    `-x > -1` -> `(-\\infty,1)`, `0 < f(x) < 1` -> `(0,1)`. None for anything else (two variables, a bound that is
    itself a relation or a list, mixed directions). Linear: the span is split once at its relations."""
    parts = RELATION_OPERATOR.split(span)
    ops = [_order(m.group()) for m in RELATION_OPERATOR.finditer(span)]
    terms = [p.strip() for p in parts]
    if not all(terms) or any(_TOP_LIST.search(t) for t in terms):
        return None
    if len(ops) == 2 and _VARIABLE.fullmatch(terms[1]) and ops[0] in _UPPER and ops[1] in _UPPER:  # lo < x < hi
        return f"{'(' if ops[0] == '<' else '['}{terms[0]},{terms[2]}{_UPPER[ops[1]]}"
    if len(ops) == 2 and _VARIABLE.fullmatch(terms[1]) and ops[0] in _LOWER and ops[1] in _LOWER:  # hi > x > lo
        return as_interval(f"{terms[2]}{_FLIP[ops[1]]}{terms[1]}{_FLIP[ops[0]]}{terms[0]}")
    if len(ops) != 1:
        return None
    (left, right), op = terms, ops[0]
    if not _VARIABLE.fullmatch(left.removeprefix("-").strip()):  # `5 > x`: the variable on the right
        left, right, op = right, left, _FLIP[op]
    if left.startswith("-"):  # `-x > -1` is `x < 1`
        left, right, op = left[1:].strip(), _negated(right), _FLIP[op]
    if not _VARIABLE.fullmatch(left):
        return None
    if op in _UPPER:
        return f"(-\\infty,{right}{_UPPER[op]}"
    return f"{_LOWER[op]}{right},\\infty)"


_TOP_LIST = re.compile(r"[,;=]")
_SIGNED_TERM = re.compile(r"-?[^-+]+")


def _order(op: str) -> str:
    """One spelling per relation: `<`, `>`, `≤`, `≥`."""
    if op in ("<", ">", "≤", "≥", "<=", ">="):
        return {"<=": "≤", ">=": "≥"}.get(op, op)
    return {"l": "≤", "g": "≥"}[op[1]] if op[2] == "e" else {"l": "<", "g": ">"}[op[1]]


def _negated(term: str) -> str:
    """-term, written simply when term is one signed term (`-1` -> `1`, `\\frac12` -> `-\\frac12`)."""
    if not _SIGNED_TERM.fullmatch(term):
        return f"-({term})"
    return term[1:].strip() if term.startswith("-") else f"-{term}"


def _span_values(body: str) -> list[tuple[str, str]]:
    """(statement, value) pairs of one math span: display lines and `a=2, h=-1` are split, `\\pm` expanded."""
    out = []
    for line in re.split(r"\\\\", body):
        line = _ENVIRONMENT.sub(" ", line).replace("&", " ").strip(_EDGE_PUNCT).removesuffix("\\text {. }")
        for part in _TOP_COMMA.split(line.strip(_EDGE_PUNCT)):
            part = part.strip(_EDGE_PUNCT)
            pieces = _RELATION.split(part)
            short = len(part) <= MAX_SPAN  # as_interval's regex is quadratic on long text with many '<'
            value = pieces[-1].strip(_EDGE_PUNCT) if len(pieces) > 1 else (short and as_interval(part)) or part
            if not value or len(value) > MAX_SPAN:
                continue
            values = [value.replace("\\pm", s) for s in "+-"] if "\\pm" in value else [value]
            out += [(part if short else v, v) for v in values]
    return out


def _sentence_candidates(sentence: str) -> tuple[list[str], list[str]]:
    """Candidates of one sentence, and its constants in order.

    Candidates: each math statement and its value (right of its last relation, or its interval), the numbers written
    in prose, the last m constants joined by ',' for every m >= 2 (a list of answers stated one by one: `$k=8$ or
    $k=4$` -> `8,4`; a constant has a digit or infinity and no variable), likewise the last m <= 4 equations
    (`$f(x)=x$ and $f(x)=-x$` -> `f(x)=x,f(x)=-x`), and intervals joined by a union.
    """
    out: list[str] = []
    ordered: list[tuple[int, int, str]] = []  # (position in the sentence, arrival, value)
    relations: list[str] = []
    for m in _MATH.finditer(sentence):
        for statement, value in _span_values(next(g for g in m.groups() if g is not None)):
            out += [value, statement]
            ordered.append((m.start(), len(ordered), value))
            if statement != value and "=" in statement:
                relations.append(statement)
    prose = _MATH.sub(lambda m: " " * len(m.group(0)), sentence)
    for m in _PROSE_NUMBER.finditer(prose):
        out.append(m.group(0))
        ordered.append((m.start(), len(ordered), m.group(0)))
    values = [v for _, _, v in sorted(ordered) if re.search(r"\d|\\infty", v) and not _FREE_LETTER.search(v)]
    for group in (values, relations[-4:]):
        out += [",".join(group[-m:]) for m in range(2, len(group) + 1)]
    intervals = [v for v in values if v[:1] in "([" and "," in v]
    if len(intervals) > 1:
        out.append(" \\cup ".join(intervals))
    return out, values


def statements(text: str) -> list[str]:
    """Gold extractor for solutions in prose: candidates (see `_sentence_candidates`) of the last sentences, last
    first, up to MAX_STATEMENTS; the constants of the last 2, 3 and 4 sentences joined (answers in parts, one per
    sentence); then candidates of the first three sentences (some solutions open with their answer). Bold answers
    are unbolded, binomial arrays rewritten, and figure placeholders and tables dropped first."""
    text = _IMAGES.sub(" ", _JUNK_LINES.sub("", _unbold(text)))
    sentences = [s for s in _SENTENCE.split(text) if s.strip()]
    out: list[str] = []
    tail_values: list[list[str]] = []
    for sentence in reversed(sentences):
        candidates, values = _sentence_candidates(sentence)
        out += candidates
        if values and len(tail_values) < 4:
            tail_values.insert(0, values)
        if len(out) > 4 * MAX_STATEMENTS:
            break
    for k in range(2, len(tail_values) + 1):
        joined = [v for values in tail_values[-k:] for v in values]
        if len(joined) <= 12:
            out.insert(0, ",".join(joined))
    unique = [c for c in dict.fromkeys(c.strip(_EDGE_PUNCT) for c in out) if c and len(c) <= 2 * MAX_SPAN]
    opening = [c.strip(_EDGE_PUNCT) for s in sentences[:3] for c in _sentence_candidates(s)[0]]
    return list(dict.fromkeys(unique[:MAX_STATEMENTS] + [c for c in opening if c and len(c) <= 2 * MAX_SPAN]))


def _one(fn: Callable[[str], str | None]) -> Callable[[str], list[str]]:
    def many(text: str) -> list[str]:
        found = fn(text)
        return [] if found is None else [found]

    many.__doc__ = fn.__doc__
    return many


ANSWER_EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "boxed": boxed,
    "boxed_number": boxed_number,
    "after_bar": after_bar,
    "whole_text": whole_text,
}
GOLD_EXTRACTORS: dict[str, Callable[[str], list[str]]] = {
    "boxed": _one(boxed),
    "hashes_number": _one(hashes_number),
    "after_bar": _one(after_bar),
    "whole_text": _one(whole_text),
    "statements": statements,
}
SOURCE_EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "boxed": boxed,
    "hashes": hashes,
    "hashes_number": hashes_number,
    "before_hashes": before_hashes,
}
