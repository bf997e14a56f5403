"""Comparisons the grader settles without math-verify: plain numbers, scientific-notation golds, missing variables.

All take canonical answers (`hacrl_exp.rewards.forms.canonical`) and return True / False when they decide, None when
math-verify must.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

_PLAIN = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
_SCIENTIFIC = re.compile(r"([-+]?)(\d+(?:\.\d*)?|\.\d+)\s*(?:\\times|\\cdot)\s*10\s*\^\s*\{?\s*([-+]?\d{1,4})\s*\}?")
_POWER = re.compile(r"([-+]?)10\s*\^\s*\{?\s*([-+]?\d{1,4})\s*\}?")
_FRACTION = re.compile(r"([-+]?)\\frac\s*(?:\{\s*(-?\d{1,30})\s*\}|(\d))\s*(?:\{\s*(\d{1,30})\s*\}|(\d))")
_SLASH = re.compile(r"([-+]?\d{1,30})\s*/\s*(\d{1,30})")
_INFINITY = re.compile(r"([-+]?)\s*\\infty")
_TEXT_ONLY = re.compile(r"\\text\s*\{\s*([A-Za-z][A-Za-z ]*?)\s*\}")
_MARKUP = re.compile(r"\\(?:text|mathrm|mbox|textrm|operatorname|mathbf)\s*\{[^{}]*\}|\\[A-Za-z]+")
_LETTER = re.compile(r"[A-Za-z]")
_LHS = re.compile(r"^\s*[A-Za-z](?:_\{?\w+\}?)?(?:\([^()]*\))?\s*=")


def is_number(text: str) -> bool:
    """`text` is one number `exact_values_equal` reads (a decimal, `a\\times10^{b}`, `10^{b}`, an integer fraction)."""
    return _number(text) is not None


def hundredth(number: str) -> str:
    """`number` / 100, exactly: a decimal for a plain decimal (`50` -> `0.50`), else `\\frac{number}{100}`."""
    return format(Decimal(number).scaleb(-2), "f") if _PLAIN.fullmatch(number) else f"\\frac{{{number}}}{{100}}"


def exact_values_equal(answer: str, gold: str) -> bool | None:
    """Exact comparison when both sides are numbers this reads (`_number`: decimals, `a\\times10^{b}`, integer
    fractions), or lists of them: a bare list compares as a multiset (`1,2` = `2,1`, as math-verify compares sets),
    a bracketed tuple or interval item by item with the same brackets (a tuple
    also matches a bare list gold in the same order). None when math-verify must decide."""
    a, g = _values(answer), _values(gold)
    if a is None or g is None:
        return None
    (a_open, a_items, a_close), (g_open, g_items, g_close) = a, g
    if len(a_items) != len(g_items):
        return False
    if (a_open, a_close) == (g_open, g_close):
        return a_items == g_items if a_open else sorted(a_items) == sorted(g_items)
    return not g_open and a_open == "(" and a_items == g_items  # a tuple for a bare list gold (OlympiadBench's form)


def _values(text: str) -> tuple[str, list[Fraction], str] | None:
    """(opening bracket or "", exact values, closing bracket) of a number or a flat list of numbers; else None."""
    text = text.strip()
    opening, closing = "", ""
    if text[:1] in "([" and text[-1:] in ")]" and text.count("(") + text.count("[") == 1:
        opening, closing, text = text[0], text[-1], text[1:-1]
    items = [_endpoint(item) for item in text.split(",")] if text and len(text) < 2000 else [None]
    return None if any(v is None for v in items) else (opening, items, closing)


def matches_scientific(answer: str, gold: str) -> bool | None:
    """For a gold in scientific notation `m\\times10^{e}` with s significant figures: does the answer's value round to
    it at s figures, given with at least s? None when the gold is not of that form or the answer is not a number
    this reads (a plain decimal, `a\\times10^{b}`, `10^{b}`, or an integer fraction)."""
    m = _SCIENTIFIC.fullmatch(gold.strip())
    value = _number(answer)
    if m is None or value is None:
        return None
    sign, mantissa, exponent = m.groups()
    figures = len(mantissa.replace(".", "").lstrip("0")) or 1
    digits = Decimal(mantissa)
    target = Fraction(Decimal(sign + mantissa)) * Fraction(10) ** int(exponent)
    if target == 0:
        return value == 0
    last_place = digits.adjusted() - figures + 1 + int(exponent)  # power of ten of the gold's last significant figure
    half_unit = Fraction(1, 2) * Fraction(10) ** last_place
    if _significant_figures(answer) is not None and _significant_figures(answer) < figures:
        return False  # fewer figures than the gold states is a rounding that differs
    return abs(value - target) <= half_unit


def variables_missing(answer: str, gold: str) -> bool:
    """True when the gold names a variable (a letter outside `\\text{}` and commands, the left side of `v =` aside)
    that the answer does not: math-verify drops some letters as units, so `\\frac{37}{4} m` would equal
    `\\frac{37}{4}`."""
    gold_letters = set(_LETTER.findall(_MARKUP.sub(" ", _LHS.sub("", gold))))
    return bool(gold_letters - set(_LETTER.findall(_MARKUP.sub(" ", answer))))


def text_answers_equal(answer: str, gold: str) -> bool | None:
    """Two answers that are words (`\\text{east}`, `\\text{Evelyn}`): equal when the words are, ignoring case."""
    a, g = _TEXT_ONLY.fullmatch(answer.strip()), _TEXT_ONLY.fullmatch(gold.strip())
    return None if a is None or g is None else a.group(1).lower() == g.group(1).lower()


def _endpoint(text: str) -> Fraction | float | None:
    """A number, or ±infinity (an interval's open end)."""
    m = _INFINITY.fullmatch(text.strip())
    if m:
        return float("-inf") if m.group(1) == "-" else float("inf")
    return _number(text)


def _number(text: str) -> Fraction | None:
    """The exact value of a plain decimal, `a\\times10^{b}`, `10^{b}`, `\\frac{p}{q}` (`\\frac12` too) or `p/q`; None
    otherwise."""
    text = text.strip()
    if _PLAIN.fullmatch(text):
        return Fraction(Decimal(text))
    m = _SCIENTIFIC.fullmatch(text)
    if m:
        return Fraction(Decimal(m.group(1) + m.group(2))) * Fraction(10) ** int(m.group(3))
    m = _POWER.fullmatch(text)
    if m:
        return (-1 if m.group(1) == "-" else 1) * Fraction(10) ** int(m.group(2))
    m = _FRACTION.fullmatch(text)
    if m and int(m.group(4) or m.group(5)):
        numerator, denominator = int(m.group(2) or m.group(3)), int(m.group(4) or m.group(5))
        return (-1 if m.group(1) == "-" else 1) * Fraction(numerator, denominator)
    m = _SLASH.fullmatch(text)
    if m and int(m.group(2)):
        return Fraction(int(m.group(1)), int(m.group(2)))
    return None


def _significant_figures(text: str) -> int | None:
    """Significant figures a decimal mantissa states (`8.71\\times10^{8}`: 3); None for exact forms (fractions)."""
    text = text.strip()
    m = _SCIENTIFIC.fullmatch(text)
    digits = m.group(2) if m else text.lstrip("+-") if _PLAIN.fullmatch(text) else None
    if digits is None:
        return None
    return len(digits.replace(".", "").lstrip("0")) or 1  # an integer's trailing zeros count: `17000` may be exact
