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
_FRACTION = re.compile(r"([-+]?)\\frac\s*\{\s*(\d{1,30})\s*\}\s*\{\s*(\d{1,30})\s*\}")
_MARKUP = re.compile(r"\\(?:text|mathrm|mbox|textrm|operatorname|mathbf)\s*\{[^{}]*\}|\\[A-Za-z]+")
_LETTER = re.compile(r"[A-Za-z]")
_LHS = re.compile(r"^\s*[A-Za-z](?:_\{?\w+\}?)?(?:\([^()]*\))?\s*=")


def plain_numbers_equal(answer: str, gold: str) -> bool | None:
    """Exact decimal equality when both are plain decimal literals (`1.60` = `1.6`, `0.33` ≠ `0.333`), else None."""
    if _PLAIN.fullmatch(answer) and _PLAIN.fullmatch(gold):
        return Decimal(answer) == Decimal(gold)
    return None


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


def _number(text: str) -> Fraction | None:
    """The exact value of a plain decimal, `a\\times10^{b}`, `10^{b}` or `\\frac{p}{q}`; None otherwise."""
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
    if m and int(m.group(3)):
        return (-1 if m.group(1) == "-" else 1) * Fraction(int(m.group(2)), int(m.group(3)))
    return None


def _significant_figures(text: str) -> int | None:
    """Significant figures a decimal mantissa states (`8.71\\times10^{8}`: 3); None for exact forms (fractions)."""
    text = text.strip()
    m = _SCIENTIFIC.fullmatch(text)
    digits = m.group(2) if m else text.lstrip("+-") if _PLAIN.fullmatch(text) else None
    if digits is None:
        return None
    digits = digits.replace(".", "").lstrip("0")
    if "." not in (m.group(2) if m else text):
        digits = digits.rstrip("0")  # trailing zeros of an integer are placeholders
    return len(digits) or 1
