"""Answer forms: one canonical spelling for a final answer, applied to gold answers (once, at load time) and to
extracted model answers (at grading time) by the same rules, so that equal values written differently compare equal
and math-verify sees LaTeX it parses as intended.

The rules (`canonical`), each for a form that graded wrong before it existed (docs/evaluation.md, "Answer forms"):

| form | example | canonical |
|---|---|---|
| math delimiters, `\\displaystyle`, `\\left` / `\\right`, spaces `\\, \\! \\; \\: \\quad` (a run as one) | `$\\left( 3, \\tfrac12 \\right)$` | `(3,\\frac12)` |
| `\\dfrac`, `\\tfrac` | `\\dfrac{1}{2}` | `\\frac{1}{2}` |
| thousands separators (thin space, `{,}`, `,\\!`, a comma with no space, also inside braces); a comma and a space part list items | `10\\,080`, `\\frac{20,000}{\\pi}`, `32, 349` | `10080`, `\\frac{20000}{\\pi}`, `32, 349` |
| e-notation (Minerva's gold answers) | `4.5e33`, `1e-5` | `4.5\\times10^{33}`, `1\\times10^{-5}` |
| a trailing-dot float in a quotient (Minerva) | `-1./3` | `-1/3` |
| degrees, and a temperature scale after them | `90°`, `90^{\\circ}`, `90\\text{ degrees}`, `-3^\\circ C` | `90`, `-3` |
| currency and percent signs | `\\$32,348`, `20\\%` | `32348`, `20` |
| units after a number (`\\text{}`, `\\mathrm{}`, `\\mbox{}`; plain words of 2+ letters) | `5.4 \\text{ cents}`, `18 dollars` | `5.4`, `18` |
| a number and its unit inside one `\\text{}` | `\\text{3 bolts}` | `3` |
| repeating decimals | `4.\\overline{6}` | `\\frac{14}{3}` |
| relation spellings | `>=`, `\\ge`, `\\geqslant`, `\\lt`, `!=`, `\\\\le` (escaped twice) | `\\geq`, `\\geq`, `\\geq`, `<`, `\\neq`, `\\leq` |
| a one-variable inequality, either side, a negated variable, a range | `3 < x \\le 4`, `5 \\geq x`, `-x>-1`, `0<f(x)<1` | `(3,4]`, `(-\\infty,5]`, `(-\\infty,1)`, `(0,1)` |
| `bmatrix`, an `array` in brackets (in parentheses: with 2+ columns) | `\\left[\\begin{array}{cc} 1 & 2 \\\\ 3 & 4 \\end{array}\\right]` | `\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}` |
| a choice letter | `\\text{(C)}`, `(C)` | `C` |
| an answer phrase in the box | `\\text{The answer is } 20` | `20` |
| a number word, a multiplier word | `\\text{six}`, `3\\text{ million}` | `6`, `3\\times10^{6}` |
| arcsecond / arcminute marks after a number | `0.33^{\\prime\\prime}` | `0.33` |
| a mixed number (the whole answer) | `4\\frac{2}{3}` | `\\frac{14}{3}` |
| inequalities joined by "or" | `x<2 \\text{ or } x>3` | `(-\\infty,2)\\cup(3,\\infty)` |
| "and" / "or" after a list item (a digit or a closing bracket) | `19, 46, \\text{ and } 82`, `3 \\text{ or } 4` | `19, 46,82`, `3,4` |
| `\\pm` / `\\mp` in list items and tuples | `1, \\frac{3\\pm\\sqrt5}{2}`, `(\\pm 3, 2)` | `1,\\frac{3+\\sqrt5}{2},\\frac{3-\\sqrt5}{2}`, `(3,2),(-3,2)` |
| a vector as one row or column | `\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}` | `(1,2)` |
| a named point, a choice label before the value | `P(8,-2)`, `\\textbf{(A)}\\ 21` | `(8,-2)`, `21` |
| inverse trigonometric spellings | `\\sin^{-1}`, `np.arcsin` | `\\arcsin` |
| a trailing full stop, a trailing line break | `42.`, `185\\\\` | `42`, `185` |

A hedge `3 \\text{ or } 4` becomes the list `3,4`, so a gold of one part still rejects it (the count differs).
What is deliberately *not* rewritten (so near misses stay wrong): signs, list elements and their count, interval
endpoints (open vs closed), digits of a decimal (no rounding: `1.6` vs `1.63` differs), the order inside a tuple,
and a unit that is the whole answer (`\\text{cm}`, `\\text{Evelyn}`). Degrees vs radians: a degree sign is dropped (as
math-verify does), so `30^\\circ` is 30 and never equals `\\frac{\\pi}{6}`; the gold's unit decides. Every rule is a linear-time regex or a bounded loop,
safe on hostile text.
"""

from __future__ import annotations

import functools
import itertools
import re
from fractions import Fraction

from hacrl_exp.rewards.extract import RELATION_OPERATOR, as_interval

_DELIMITERS = re.compile(r"(?<!\\)\$|\\displaystyle|\\left(?![A-Za-z])|\\right(?![A-Za-z])")
_THIN_SPACE = re.compile(r"(?<!\\)\\(?:[,!;: ]|q?quad(?![A-Za-z]))")
_BMATRIX = re.compile(r"\\(begin|end)\{bmatrix\}")
_ARRAY = re.compile(  # `[\begin{array}{cc}..\end{array}]`; a one-column array in parentheses is a binomial
    r"\[\s*\\begin\{array\}\{[lcr| ]{1,40}\}(.*?)\\end\{array\}\s*\]"
    r"|\(\s*\\begin\{array\}\{[ |]*[lcr][ |]*[lcr][lcr| ]{0,40}\}(.*?)\\end\{array\}\s*\)",
    re.S,
)
_ANSWER_PHRASE = re.compile(r"^\\(?:text|textbf|mbox)\s*\{\s*(?:the\s+)?(?:final\s+)?answer\s+is:?\s*\}\s*", re.I)
_WORDS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
_NUMBER_WORD = re.compile(r"^(?:\\(?:text|textbf|mbox)\s*\{\s*)?(" + "|".join(_WORDS) + r")\s*\}?$", re.I)
_MULTIPLIERS = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_MULTIPLIER_TEXT = re.compile(
    r"(?<=\d)\s*\\(?:text|mathrm|mbox)\s*\{\s*(thousand|million|billion|trillion)\b([^{}]*)\}"
)
_MULTIPLIER_WORD = re.compile(r"(?<=\d)\s+(thousand|million|billion|trillion)\b")
_PRIMES = re.compile(r"(?<=\d)\s*\^\s*\{?\s*(?:\\prime\s*){1,2}\}?|(?<=\d)\s*(?:''|\")")
_MIXED = re.compile(r"^(-?)(\d+)\s*\\frac\s*\{(\d+)\}\s*\{(\d+)\}$")
_VECTOR = re.compile(r"^\\begin\{pmatrix\}(.*)\\end\{pmatrix\}$", re.S)
_NAMED_POINT = re.compile(r"^[A-Z]\s*(?=\()")
_CHOICE_LABEL = re.compile(r"^(?:\\textbf\s*\{\s*\(\s*[A-E]\s*\)\s*\}|\(\s*[A-E]\s*\))\s*(?=\S)")
_INVERSE_TRIG = re.compile(
    r"\\(sin|cos|tan)\s*\^\s*\{\s*-\s*1\s*\}|\\(sin|cos|tan)\s*\^\s*-\s*1|\bnp\.arc(sin|cos|tan)"
)
_COMMAND_SPACE = re.compile(r"\\(text|mathrm|mathbf|textbf|operatorname)\s+\{")
_SIGNS = re.compile(r"\\pm|\\mp")
_SUBSCRIPT_TEXT = re.compile(r"_\s*\{\s*\\(?:text|mathrm)\s*\{([^{}]*)\}\s*\}")
_BARE_SUBSCRIPT = re.compile(r"_([A-Za-z0-9])")
_LEADING_PLUS = re.compile(r"(^|[(,{=])\s*\+\s*")
_DFRAC = re.compile(r"\\[dt]frac(?![A-Za-z])")
_CURRENCY = re.compile(r"\\\$|\\text\{\s*\\?\$\s*\}")
_PERCENT = re.compile(r"\s*(?:\\%|%|\\text\{\s*\\?%\s*\})\s*$")
_DEGREE_WORD = re.compile(r"\s*\\(?:text|mathrm|mbox|textrm)\s*\{\s*degrees?\s*\}|\s+degrees?$")
_DEGREE = re.compile(r"°|\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![A-Za-z])")
_DEGREE_SCALE = re.compile(r"\^\\circ\s*(?:\\(?:text|mathrm)\s*\{\s*[CFK]\s*\}|[CFK](?![A-Za-z]))")
_GROUPED = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?"
_BRACED_THOUSANDS = re.compile(r"(?<=\{)\s*(" + _GROUPED + r")\s*(?=\})")
_WHOLE_THOUSANDS = re.compile(r"[-+]?" + _GROUPED)
_SPACED_THOUSANDS = re.compile(r"(?<=\d)(?:\{,\}|~|\\[ ,!;:]|,\\!\s*)(?=\d{3}(?!\d))")
_RELATION_SPELLING = re.compile(
    r"(?<!\\)\\(?=\\(?:[lg]eq?|[lg]t|neq?)(?:slant)?(?![A-Za-z]))"  # the first `\` of `\\le` (escaped twice)
    r"|\\(?:leqslant|leq|le|geqslant|geq|ge|lt|gt|neq|ne)(?![A-Za-z])|<=|>=|!=|≤|≥|≠"
)
_JOINING_WORD = re.compile(  # "and" / "or" after a list item (a digit or a closing bracket)
    r"(?<=[\d)\]}])\s*(?:,\s*)?(?:\\text\s*\{\s*(?:,\s*)?(?:and|or)\s*\}|(?<![A-Za-z])(?:and|or)(?![A-Za-z]))\s*"
)
_E_NOTATION = re.compile(r"(?<![\w.\\])(\d+(?:\.\d*)?|\.\d+)[eE]([-+]?\d+)(?![\w.])")
_DOT_SLASH = re.compile(r"(?<=\d)\./")
_REPEATING = re.compile(r"(?<![\d.])(\d*)\.(\d*)\\overline\s*\{(\d{1,12})\}")
_UNIT_GROUP = r"(?:\\mu\s*)?\\(?:text|mathrm|mbox|textrm)\s*\{[^{}]*[A-Za-z][^{}]*\}(?:\s*\^\s*\{?-?\d\}?)?"
_TRAILING_UNITS = re.compile(r"(?<=[\d}).\s])\s*(?:" + _UNIT_GROUP + r"|/\s*" + _UNIT_GROUP + r")\s*$")
_TEXT_NUMBER_UNIT = re.compile(r"^\\(?:text|mbox|textrm)\s*\{\s*([-+]?\d[\d,.]*)\s+[A-Za-z][A-Za-z ]*\}$")
_TRAILING_WORDS = re.compile(r"(?<=\d)\s+[A-Za-z]{2,}(?:\s+[A-Za-z]{2,})*$")
_CHOICE = re.compile(r"^(?:\\(?:text|textbf|mathrm|mathbf)\s*\{\s*)?\(?\s*([A-E])\s*\)?\s*\}?$")
_IN_SET = re.compile(r"^[A-Za-z]\s*\\in\s*")
_SPACE = re.compile(r"\s+")
_MAX_ARRAYS = 2
_MAX_PASSES = 4  # units stack at most like `5\,\text{km}/\text{h}`; a bound keeps hostile input linear


def canonical(answer: str) -> str:
    """The canonical spelling of one final answer (see the module table). Idempotent (the rules are applied until the
    text stops changing: one rule's output can be another's input, e.g. `\\° 0`); never raises on any str."""
    # a training step grades G responses against each gold: short answers are cached; long ones (a degenerate
    # model's box can hold 20,000 characters) are not, so the cache stays small
    return _canonical_cached(answer) if len(answer) <= _CACHED_CHARS else _to_fixpoint(answer)


_CACHED_CHARS = 512


@functools.lru_cache(maxsize=65536)
def _canonical_cached(answer: str) -> str:
    return _to_fixpoint(answer)


def _to_fixpoint(answer: str) -> str:
    for _ in range(_MAX_PASSES):
        rewritten = _rewrite_once(answer)
        if rewritten == answer:
            break
        answer = rewritten
    return answer


def _rewrite_once(answer: str) -> str:
    """One pass of every rule of the module table, in order."""
    s = _DELIMITERS.sub("", answer).strip()
    s = _SPACED_THOUSANDS.sub("", s)
    s = _SPACE.sub(" ", _THIN_SPACE.sub(" ", s))  # one space per run: the `\s*` rules below then stay linear
    s = _ANSWER_PHRASE.sub("", s)
    word = _NUMBER_WORD.match(s)
    if word:
        s = str(_WORDS.index(word.group(1).lower()))
    s = _MULTIPLIER_TEXT.sub(_multiplied_text, s)
    s = _MULTIPLIER_WORD.sub(lambda m: f"\\times10^{{{_MULTIPLIERS[m.group(1)]}}}", s)
    s = _PRIMES.sub("", s)
    s = _DFRAC.sub(r"\\frac", s)
    s = _COMMAND_SPACE.sub(r"\\\1{", s)
    s = _INVERSE_TRIG.sub(lambda m: "\\arc" + next(g for g in m.groups() if g), s)
    s = _CHOICE_LABEL.sub("", s)
    if s.count("\\begin{array}") <= _MAX_ARRAYS:  # the lazy match rescans the rest after each opening
        s = _ARRAY.sub(lambda m: f"\\begin{{pmatrix}}{m.group(1) or m.group(2)}\\end{{pmatrix}}", s)
    s = _BMATRIX.sub(r"\\\1{pmatrix}", s)
    s = _CURRENCY.sub("", s)
    s = _DEGREE_WORD.sub(r"^\\circ", s)
    s = _DEGREE.sub(r"^\\circ", s)
    s = _DEGREE_SCALE.sub("", s).replace("^\\circ", "")
    for _ in range(_MAX_PASSES):
        before = s
        s = _PERCENT.sub("", s)
        s = _TRAILING_UNITS.sub("", s).strip()
        s = _TRAILING_WORDS.sub("", s).strip().rstrip(".").strip()
        if s == before:
            break
    s = _TEXT_NUMBER_UNIT.sub(r"\1", s)
    s = _thousands(s)
    s = _E_NOTATION.sub(lambda m: f"{m.group(1)}\\times10^{{{int(m.group(2))}}}", s)
    s = _DOT_SLASH.sub("/", s)
    s = _REPEATING.sub(_repeating_fraction, s)
    s = _MIXED.sub(_improper, s.strip())
    s = _RELATION_SPELLING.sub(_relation, s)
    s = _interval(s)
    s = _JOINING_WORD.sub(",", s)
    s = _VECTOR.sub(_vector, s)
    s = _NAMED_POINT.sub("", s)
    if "\\pm" in s or "\\mp" in s:
        s = _expand_list(s)
    s = _SUBSCRIPT_TEXT.sub(r"_{\1}", s)
    s = _BARE_SUBSCRIPT.sub(r"_{\1}", s)
    choice = _CHOICE.match(s)
    if choice:
        s = choice.group(1)
    return _without_trailing_break(s.strip())


normalize_gold = canonical
"""Gold answers are normalised once, when a task or benchmark loads its rows (the same rules as answers)."""


def compact(answer: str) -> str:
    """`canonical` without any whitespace: two answers with equal compact forms are the same answer."""
    return _SPACE.sub("", canonical(answer))


def unlabelled(item: str) -> str:
    """A list item without its label: `N_{\\min} = 2500` -> `2500`, `x = 1` -> `1`; unlabelled items unchanged."""
    labelled = label_value(item)
    return labelled[1] if labelled else item


def label_value(item: str) -> tuple[str, str] | None:
    """(label, value) of an item `label = value` whose label names a quantity: letters, subscripts, commands, and
    `\\frac{}{}`, `|..|`, `:` or a tuple of names (`x`, `AB`, `N_{\\min}`, `f(x)`, `|AB|`, `V_{1}:V_{2}`,
    `\\frac{NO}{BO}`, `(p,q)`); None for anything else, an equation such as `2x+4y-3=0` or `7 = 11a+c` included."""
    left, equals, right = item.partition("=")
    if not equals or "=" in right or not right.strip() or len(left) > _MAX_LABEL:
        return None
    name = _LABEL_MARKUP.sub("", left)
    return (_SPACE.sub("", left), right.strip()) if _LABEL_NAME.fullmatch(name) else None


_MAX_LABEL = 60
_LABEL_MARKUP = re.compile(r"_\s*(?:\{[^{}]*\}|\\?\w)|\\[A-Za-z]+|\\[,;:! ]")
_LABEL_NAME = re.compile(r"[\s(){}|:,]*[A-Za-z][A-Za-z\s(){}|:,]*")


def several_parts(answer: str) -> bool:
    """The answer is a list of more than one item, also inside a set `\\{..\\}` or a brace group `{..}`."""
    s = _ungrouped(canonical(answer))
    if s.startswith("\\{") and s.endswith("\\}"):
        s = s[2:-2]
    return len(split_top_level(s)) > 1


def split_top_level(answer: str) -> list[str]:
    """The comma-separated items of a list answer, splitting only outside brackets and braces."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(answer):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(answer[start:i].strip())
            start = i + 1
    return [*items, answer[start:].strip()]


def _thousands(s: str) -> str:
    s = _SPACED_THOUSANDS.sub("", s)
    s = _collapse_spaced_number(s)
    s = _BRACED_THOUSANDS.sub(lambda m: m.group(1).replace(",", ""), s)
    if _WHOLE_THOUSANDS.fullmatch(s.strip()):  # `1,080`; `32, 349` (a comma and a space) is a list
        s = s.strip().replace(",", "")
    return s


_SPACED_NUMBER = re.compile(r"[-+]?\d{1,3}(?: \d{3})+(?:\.\d+)?")


def _collapse_spaced_number(s: str) -> str:
    """`10 080` (a thin space made plain) is one number only when that is the whole answer."""
    return s.replace(" ", "") if _SPACED_NUMBER.fullmatch(s) else s


def _repeating_fraction(m: re.Match) -> str:
    """`I.N\\overline{R}` as an exact fraction: I.N + R / (10^|N| (10^|R| - 1))."""
    whole, fixed, period = m.group(1) or "0", m.group(2), m.group(3)
    value = Fraction(int(whole + fixed), 10 ** len(fixed)) + Fraction(
        int(period), 10 ** len(fixed) * (10 ** len(period) - 1)
    )
    return str(value.numerator) if value.denominator == 1 else f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


def _interval(s: str) -> str:
    """A one-variable inequality (`3 < x \\le 4`) as its interval, inequalities joined by "or" as the union of
    theirs; `x \\in [a, b)` as `[a, b)`. Anything else is returned unchanged."""
    s = _IN_SET.sub("", s)
    if len(s) > 200 or not RELATION_OPERATOR.search(s):
        return s
    parts = _OR.split(_GREEK.sub("x", s))
    intervals = []
    for part in parts:
        if len(RELATION_OPERATOR.findall(part)) > 2:
            return s
        interval = None if part.rstrip().endswith("\\") else as_interval(part)
        if interval is None:  # not an inequality (a bound that is a lone backslash is garbage, not a number)
            return s
        intervals.append(interval)
    return "\\cup".join(intervals)


_OR = re.compile(r"\s*(?:\\text\s*\{\s*or\s*\}|\bor\b|\\lor|\\vee|\\cup)\s*")
_GREEK = re.compile(r"\\(?:alpha|beta|gamma|delta|epsilon|theta|lambda|mu|nu|rho|sigma|tau|phi|psi|omega)(?![A-Za-z])")


def _relation(m: re.Match) -> str:
    """One spelling per relation: `\\leq`, `\\geq`, `<`, `>`, `\\neq` (a doubled backslash before one dropped)."""
    op = m.group()
    if op == "\\":
        return ""
    if op in ("<=", "≤") or op.startswith("\\le"):
        return "\\leq"
    if op in (">=", "≥") or op.startswith("\\ge"):
        return "\\geq"
    return {"\\lt": "<", "\\gt": ">"}.get(op, "\\neq")


def _without_trailing_break(s: str) -> str:
    """`185\\\\` and `185\\` (a line break, or half of one, left at the end) as `185`."""
    kept = s.rstrip("\\")
    return kept.rstrip() if len(s) - len(kept) in (1, 2) else s


def _ungrouped(s: str) -> str:
    """`{1,2,3}` (a brace group around the whole answer, not a set `\\{..\\}`) as `1,2,3`; else `s`."""
    if not (s.startswith("{") and s.endswith("}")):
        return s
    depth = 0
    for i, ch in enumerate(s):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth == 0:
            return s[1:-1].strip() if i == len(s) - 1 else s
    return s


def _multiplied_text(m: re.Match) -> str:
    """`3\\text{ million years}` -> `3\\times10^{6}\\text{ years}` (the rest stays a unit, dropped later)."""
    rest = m.group(2).strip()
    return f"\\times10^{{{_MULTIPLIERS[m.group(1).lower()]}}}" + (f"\\text{{ {rest}}}" if rest else "")


def _improper(m: re.Match) -> str:
    """`4\\frac{2}{3}` (a whole answer) as the improper fraction `\\frac{14}{3}`."""
    sign, whole, num, den = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
    return f"{sign}\\frac{{{whole * den + num}}}{{{den}}}" if den else m.group(0)


def _expand_list(s: str) -> str:
    """Every item of a list (or of a set `\\{...\\}`) with its `\\pm` / `\\mp` expanded (`_expand_pm`)."""
    if s.startswith("\\{") and s.endswith("\\}"):
        return "\\{" + _expand_list(s[2:-2].strip()) + "\\}"
    return ",".join(expanded for item in split_top_level(s) for expanded in _expand_pm(item))


def _expand_pm(item: str) -> list[str]:
    """One list item with `\\pm` / `\\mp` as the items it stands for. In a tuple each `\\pm` varies on its own
    (`(\\pm 3, \\pm 2)` is four points) unless a `\\mp` ties them (`(a \\pm b, a \\mp b)` is two); elsewhere all
    signs move together. At most three signs (eight items); more are left as written."""
    count = len(_SIGNS.findall(item))
    if count == 0 or count > 3:
        return [item]
    tied = not (item.startswith("(") and item.endswith(")")) or "\\mp" in item
    choices = [(sign,) * count for sign in "+-"] if tied else itertools.product("+-", repeat=count)
    out = []
    for signs in choices:
        it = iter(signs)

        def sign(m: re.Match, it=it) -> str:
            chosen = next(it)
            return chosen if m.group(0) == "\\pm" else {"+": "-", "-": "+"}[chosen]

        out.append(_LEADING_PLUS.sub(r"\1", _SIGNS.sub(sign, item)))
    return out


def _vector(m: re.Match) -> str:
    """A one-row or one-column pmatrix as a tuple; a real matrix stays as written."""
    rows = [r.strip() for r in m.group(1).split("\\\\") if r.strip()]
    if len(rows) > 1 and any("&" in r for r in rows):
        return m.group(0)
    return "(" + ",".join(c.strip() for r in rows for c in r.split("&")) + ")"
