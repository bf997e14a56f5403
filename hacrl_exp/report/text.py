"""Sentences of the report, generated from the numbers (never written by hand), and number formatting."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

from hacrl_exp.report.compare import Comparison
from hacrl_exp.report.power import MAX_SEEDS
from hacrl_exp.report.rules import EDGE
from hacrl_exp.report.stats import BEAT, FELL_SHORT, INDISTINGUISHABLE, MATCHED, REFUTED, SYMBOL, UNTESTABLE, Interval

SNAP = 9
"""Decimals a value is snapped to before rounding: accuracies are k/N, so anything past 1e-9 is float noise."""


def half_up(x: float, digits: int = 3) -> Decimal:
    """The one rounding rule of every table: x snapped to SNAP decimals, then rounded half away from zero, so
    0.34750000000000003 and 0.34749999999999998 (both 0.3475 = 139/400) give 0.348 in every table."""
    return Decimal(f"{x:.{SNAP}f}").quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)


def num(x: float, digits: int = 3) -> str:
    """'0.348' (half_up); 'n/a' for None or a non-finite value."""
    return "n/a" if x is None or not math.isfinite(x) else f"{half_up(x, digits):f}"


def signed(x: float, digits: int = 3) -> str:
    """'+0.042' (half_up); a value that rounds to 0 is '+0.000' (a float like −1e−18 would otherwise print '-0.000')."""
    if x is None or not math.isfinite(x):
        return "n/a"
    value = half_up(x, digits)
    return f"{abs(value):f}".join(("-" if value < 0 else "+", ""))


def pval(p: float) -> str:
    """'0.042', or '< 0.001'."""
    return "n/a" if not math.isfinite(p) else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def p_is(p: float) -> str:
    """'p = 0.042', or 'p < 0.001'."""
    text = pval(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def interval(iv: Interval | None, digits: int = 3) -> str:
    """'0.452 [0.419, 0.488]' (mean and its interval, which need not be symmetric), or just the mean when there is
    no interval (one seed without per-problem answers)."""
    if iv is None or iv.n == 0:
        return ""
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)) or iv.low == iv.high:
        return num(iv.mean, digits)
    return f"{num(iv.mean, digits)} [{num(iv.low, digits)}, {num(iv.high, digits)}]"


def bracket(low: float, high: float) -> str:
    return f"[{signed(low)}, {signed(high)}]"


def seeds_phrase(c: Comparison) -> str:
    """'HACPO behind in 7 of 10 seeds, ahead in 2, tied in 1': the larger side first, sides of 0 left out (ties:
    |d_s| ≤ 1e-12)."""
    ahead, tied, behind = c.counts
    if tied == c.seeds.n:
        return f"tied at all {tied} seeds"
    sides = [("ahead", ahead), ("behind", behind)]
    (first, k), (second, j) = sides if ahead >= behind else sides[::-1]
    text = f"{c.a} {first} in {k} of {c.seeds.n} seeds" + (f", {second} in {j}" if j else "")
    return text + (f", tied in {tied}" if tied else "")


def margin_text(c: Comparison) -> str:
    """'±0.017 (half the paper's +0.0333, Table 1 …)', or 'none' when the comparison has no margin."""
    return f"±{num(c.margin.value)} ({c.margin.reason})" if c.margin else "none"


def effect_text(c: Comparison) -> str:
    """'+0.033 (the paper's, Table 1 …)', or 'none'."""
    return f"{signed(c.effect.value)} ({c.effect.reason})" if c.effect else "none"


def refutation(c: Comparison) -> str:
    """'the hypothesised +0.033 is refuted (one-sided 95% upper bound +0.001 < +0.033, Holm p < 0.001)'."""
    pct = round(100 * (1 - c.significance))
    return (
        f"the hypothesised {signed(c.effect.value)} is refuted (one-sided {pct}% upper bound {signed(c.upper)} < "
        f"{signed(c.effect.value)}, Holm {p_is(c.p_refute_holm)})"
    )


def verdict_phrase(c: Comparison) -> str:
    """'▲ HACPO beat GSPO×2 for gpt2_bpe', '≈ … matched … (within ±0.017)', '✗ … refuted (…)', or '○ … not
    established (…)', naming only the tests the comparison has."""
    if c.verdict in (BEAT, FELL_SHORT):
        return f"{SYMBOL[c.verdict]} {c.a} {c.verdict} {c.b} for {c.agent}"
    if c.verdict == MATCHED:
        also = f"; {refutation(c)}" if c.refuted else ""
        return f"{SYMBOL[MATCHED]} {c.a} matched {c.b} for {c.agent} (within ±{num(c.margin.value)}{also})"
    if c.verdict == REFUTED:
        return f"{SYMBOL[REFUTED]} {c.a} vs {c.b} for {c.agent}: {refutation(c)}"
    if c.verdict == UNTESTABLE:
        tested = f"the hypothesised {signed(c.effect.value)}" if c.effect else f"the margin ±{num(c.margin.value)}"
        return (f"{SYMBOL[UNTESTABLE]} {c.a} vs {c.b} for {c.agent}: untestable (ceiling): {c.b} ends at "
                f"{num(c.means[1])}, less room than {tested} + {EDGE}")  # fmt: skip
    tried = ["a difference across seeds"]
    tried += [f"equivalence within ±{num(c.margin.value)}"] if c.margin else []
    tried += [f"a refutation of {signed(c.effect.value)}"] if c.effect else []
    tried_text = f"neither {', nor '.join(tried)}" if len(tried) > 1 else "no difference across seeds"
    return f"{SYMBOL[c.verdict]} {c.a} vs {c.b} for {c.agent}: not established ({tried_text})"


def smallest_sign_flip_p(n: int) -> float:
    """The smallest two-sided sign-flip p with n seeds: 2 / 2^n (all differences of one sign)."""
    return 2.0 / 2.0**n if n >= 1 else math.nan


def caveats(c: Comparison, level: float) -> list[str]:
    """Where the tests disagree, whichever the direction: a seed interval that excludes 0 without a passing adjusted
    p, a per-problem result on these runs that the across-seed test does not back (or the reverse), and seeds too
    few for any sign-flip p to pass Holm's first step."""
    pct, sig, out = round(100 * level), c.significance, []
    passed = c.verdict in (BEAT, FELL_SHORT)
    side = lambda x: "above" if x > 0 else "below"  # noqa: E731 - a one-word helper
    if c.seeds.n >= 2 and c.seeds.excludes_zero() and not passed:
        out.append(
            f"The {pct}% across-seed t-interval excludes 0 ({c.a} {side(c.seeds.mean)} {c.b}), but the Holm-adjusted "
            f"sign-flip p = {pval(c.p_holm)} does not pass {sig}, so the difference is not established."
        )
    if c.runs_verdict != INDISTINGUISHABLE and not passed:
        out.append(
            f"Over the problems of these runs {c.a} was {side(c.paired.delta)} {c.b} (paired bootstrap "
            f"{p_is(c.paired.p_bootstrap)}), but that test holds the trained runs fixed; across training seeds it is "
            "not established."
        )
    if passed and c.runs_verdict == INDISTINGUISHABLE:
        out.append(
            f"Across seeds the difference passes, but over the problems of these runs it does not (paired bootstrap "
            f"{p_is(c.paired.p_bootstrap)})."
        )
    tests = max(c.tests, 1)
    if c.seeds.n >= 1 and smallest_sign_flip_p(c.seeds.n) * tests >= sig:
        out.append(
            f"With {c.seeds.n} seed{'s' * (c.seeds.n != 1)} no sign-flip p can be below "
            f"{pval(smallest_sign_flip_p(c.seeds.n))} (2/2^n), and Holm over the {tests} tests of its family needs "
            f"one below {pval(sig / tests)}, so no difference can be established at {sig}."
        )
    return out


def power_text(c: Comparison) -> str:
    """'power of the report's rule at 10 seeds: 0.21; 80% at 23 seeds' (or '> 32 seeds'), '' when not simulated."""
    if not math.isfinite(c.power):
        return ""
    needed = f"{c.seeds_for_power} seeds" if c.seeds_for_power else f"> {MAX_SEEDS} seeds"
    return f"power of the report's rule at {c.seeds.n} seeds {num(c.power, 2)}, 80% at {needed}"


def sentence(c: Comparison, level: float) -> str:
    """'▲ HACPO beat GSPO×2 for gpt2_bpe. Δ = +0.042 …' with every number the verdict rests on, then the caveats."""
    pct, seeds = round(100 * level), c.seeds
    text = f"{verdict_phrase(c)}. Δ = {signed(seeds.mean)} in held-out accuracy"
    if seeds.n >= 2:
        tests = [f"sign-flip {p_is(c.p_sign_flip)} (Holm {pval(c.p_holm)})"]
        if c.margin:
            tests.append(f"TOST at ±{num(c.margin.value)} {p_is(c.p_tost)} (Holm {pval(c.p_tost_holm)})")
        if c.effect:
            tests.append(
                f"H0 Δ ≥ {signed(c.effect.value)}: {p_is(c.p_refute)} (Holm {pval(c.p_refute_holm)}), one-sided "
                f"{round(100 * (1 - c.significance))}% upper bound {signed(c.upper)}"
            )
        extra = "; ".join(filter(None, [seeds_phrase(c), power_text(c)]))
        text += (
            f" (across {seeds.n} seeds, paired by seed: {pct}% t-interval {bracket(seeds.low, seeds.high)}; "
            f"{'; '.join(tests)}; Holm over {c.tests} tests; {extra})"
        )
    else:
        text += " (1 seed: no across-seed test)"
    text += (
        f". These runs, per problem ({c.paired.problems} problems × {seeds.n} seed{'s' * (seeds.n != 1)}): "
        f"{pct}% CI {bracket(c.paired.low, c.paired.high)}, paired bootstrap {p_is(c.paired.p_bootstrap)}, exact "
        f"McNemar {p_is(c.paired.p_mcnemar)} on {c.paired.b} vs {c.paired.c} discordant answers."
    )
    return " ".join([text, *caveats(c, level)])
