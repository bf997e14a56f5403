"""A second, equivalent spelling of a gold answer, as a model might write it (the gold check's rewrite test).

`rewrite(gold)` tries one rule after another and returns the first form that differs from the input, or None when no
rule applies. Every rule preserves the value exactly:

| gold | rewritten |
|---|---|
| `4.5e33`, `1e-5` (e-notation) | `4.5 \\times 10^{33}`, `0.00001` (a plain decimal when the exponent is small) |
| `3 \\times 10^{8}` | `3e8` |
| `-1./3` | `-\\frac{1}{3}` |
| `10080`, `1,080` (integers of 4+ digits) | `10\\,080`, `1080` |
| `0.25`, `1.6` (terminating decimals) | `\\frac{1}{4}`, `\\frac{8}{5}` |
| `\\frac{1}{4}`, `-\\frac{3}{8}` (numeric fractions) | `0.25`, `-0.375` when the decimal terminates, else `\\dfrac{..}{..}` |
| anything else with `\\frac` | the same with `\\dfrac` |
| `30^\\circ` | `30°` |
| `(3, 4]`, `(-\\infty, 0]` (intervals with simple endpoints) | `3 < x \\leq 4`, `x \\leq 0` |
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

_E_NOTATION = re.compile(r"^([-+]?)(\d+(?:\.\d*)?|\.\d+)[eE]([-+]?\d+)$")
_TIMES_TEN = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*(?:\\times|\\cdot)\s*10\^\{?([-+]?\d+)\}?$")
_DOT_SLASH = re.compile(r"^([-+]?\d+)\./(\d+)$")
_INTEGER = re.compile(r"^-?(?:\d{1,3}(?:,\d{3})+|\d{4,})$")
_DECIMAL = re.compile(r"^-?\d*\.\d+$")
_FRACTION = re.compile(r"^(-?)\\[dt]?frac\{?(\d+)\}?\{?(\d+)\}?$")
_DEGREES = re.compile(r"^(-?\d+(?:\.\d+)?)\s*\^\s*\{?\\circ\}?$")
_GEQ = "\\geq"
_ENDPOINT = r"(-?\\infty|-?\d+(?:\.\d+)?|-?\\frac\{\d+\}\{\d+\})"
_INTERVAL = re.compile(r"^([(\[])" + _ENDPOINT + "," + _ENDPOINT + r"([)\]])$")


def rewrite(gold: str) -> str | None:
    """An equivalent second form of `gold` (module table), or None when no rule applies."""
    s = gold.strip().replace("\\left", "").replace("\\right", "")
    for rule in (_from_e, _to_e, _dot_slash, _thousands, _decimal_to_fraction, _fraction, _degrees, _interval, _dfrac):
        out = rule(s)
        if out is not None and out != gold:
            return out
    return None


def _from_e(s: str) -> str | None:
    m = _E_NOTATION.match(s)
    if not m:
        return None
    sign, mantissa, exponent = m.group(1), m.group(2), int(m.group(3))
    if -6 <= exponent <= 6:
        value = Decimal(mantissa).scaleb(exponent)
        return sign.replace("+", "") + format(value.normalize(), "f")
    return f"{sign.replace('+', '')}{mantissa} \\times 10^{{{exponent}}}"


def _to_e(s: str) -> str | None:
    m = _TIMES_TEN.match(s)
    return f"{m.group(1)}e{int(m.group(2))}" if m else None


def _dot_slash(s: str) -> str | None:
    m = _DOT_SLASH.match(s)
    if not m:
        return None
    sign = "-" if m.group(1).startswith("-") else ""
    return f"{sign}\\frac{{{m.group(1).lstrip('+-')}}}{{{m.group(2)}}}"


def _thousands(s: str) -> str | None:
    if not _INTEGER.match(s):
        return None
    if "," in s:
        return s.replace(",", "")
    sign, digits = ("-", s[1:]) if s.startswith("-") else ("", s)
    groups = []
    while digits:
        groups.insert(0, digits[-3:])
        digits = digits[:-3]
    return sign + "\\,".join(groups)


def _decimal_to_fraction(s: str) -> str | None:
    if not _DECIMAL.match(s):
        return None
    value = Fraction(Decimal(s))
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def _fraction(s: str) -> str | None:
    m = _FRACTION.match(s)
    if not m or int(m.group(3)) == 0:
        return None
    value = Fraction(int(m.group(2)), int(m.group(3)))
    denominator = value.denominator
    while denominator % 2 == 0:
        denominator //= 2
    while denominator % 5 == 0:
        denominator //= 5
    if denominator == 1:  # terminates: write it as a decimal
        text = format(Decimal(value.numerator) / Decimal(value.denominator), "f")
        return m.group(1) + text
    return f"{m.group(1)}\\dfrac{{{m.group(2)}}}{{{m.group(3)}}}"


def _degrees(s: str) -> str | None:
    m = _DEGREES.match(s)
    return f"{m.group(1)}°" if m else None


def _interval(s: str) -> str | None:
    m = _INTERVAL.match(s.replace(" ", ""))
    if not m:
        return None
    opening, low, high, closing = m.groups()
    below, above = ("<" if opening == "(" else "\\leq"), ("<" if closing == ")" else "\\leq")
    if "infty" in low and "infty" in high:
        return None
    if "infty" in high:
        return f"x {'>' if opening == '(' else _GEQ} {low}"
    if "infty" in low:
        return f"x {above} {high}"
    return f"{low} {below} x {above} {high}"


def _dfrac(s: str) -> str | None:
    return re.sub(r"\\frac(?![A-Za-z])", r"\\dfrac", s) if "\\frac" in s else None
