"""Sentences of the report, generated from the numbers (never written by hand), and number formatting."""

from __future__ import annotations

import math

import pandas as pd

from hacrl_exp.report.stats import BEAT, FELL_SHORT, INDISTINGUISHABLE, MATCHED, NOT_ESTABLISHED, SYMBOL, Interval
from hacrl_exp.report.tables import Comparison, ratio


def num(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def signed(x: float, digits: int = 3) -> str:
    """'+0.042'; a value that rounds to 0 is '+0.000' (a float like −1e−18 would otherwise print '-0.000')."""
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{0.0 if round(x, digits) == 0 else x:+.{digits}f}"


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


def verdict_phrase(c: Comparison) -> str:
    """'HACPO beat GSPO×2 for gpt2_bpe', '… matched … (within ±0.020)', or '… : not established (…)'."""
    margin = f"±{num(c.margin)}"
    if c.verdict in (BEAT, FELL_SHORT):
        return f"{SYMBOL[c.verdict]} {c.a} {c.verdict} {c.b} for {c.agent}"
    if c.verdict == MATCHED:
        return f"{SYMBOL[MATCHED]} {c.a} matched {c.b} for {c.agent} (within {margin})"
    return (
        f"{SYMBOL[NOT_ESTABLISHED]} {c.a} vs {c.b} for {c.agent}: not established (neither a difference across "
        f"seeds nor equivalence within {margin})"
    )


def smallest_sign_flip_p(n: int) -> float:
    """The smallest two-sided sign-flip p with n seeds: 2 / 2^n (all differences of one sign)."""
    return 2.0 / 2.0**n if n >= 1 else math.nan


def caveats(c: Comparison, level: float) -> list[str]:
    """Where the tests disagree, whichever the direction: a seed interval that excludes 0 without a passing adjusted
    p, a per-problem result on these runs that the across-seed test does not back (or the reverse), and seeds too
    few for any sign-flip p to pass."""
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
    if c.seeds.n >= 1 and smallest_sign_flip_p(c.seeds.n) >= sig:
        out.append(
            f"With {c.seeds.n} seed{'s' * (c.seeds.n != 1)} no sign-flip p can be below "
            f"{num(smallest_sign_flip_p(c.seeds.n))} (2/2^n), so no difference can be established at {sig}."
        )
    return out


def sentence(c: Comparison, level: float) -> str:
    """'▲ HACPO beat GSPO×2 for gpt2_bpe: Δ = +0.042 …' with every number the verdict rests on, then the caveats."""
    pct, seeds = round(100 * level), c.seeds
    text = f"{verdict_phrase(c)}. Δ = {signed(seeds.mean)} in held-out accuracy"
    if seeds.n >= 2:
        text += (
            f" (across {seeds.n} seeds, paired by seed: {pct}% t-interval {bracket(seeds.low, seeds.high)}, "
            f"sign-flip p = {pval(c.p_sign_flip)}, Holm-adjusted {pval(c.p_holm)}, TOST at ±{num(c.margin)} "
            f"p = {pval(c.p_tost)}, {c.a} ahead in {c.seeds_won} of {seeds.n}; seeds needed for 80% power: "
            f"{seeds_needed_text(c.seeds_needed)})"
        )
    else:
        text += " (1 seed: no across-seed test)"
    text += (
        f". These runs, per problem ({c.paired.problems} problems × {seeds.n} seed{'s' * (seeds.n != 1)}): "
        f"{pct}% CI {bracket(c.paired.low, c.paired.high)}, paired bootstrap {p_is(c.paired.p_bootstrap)}, exact "
        f"McNemar {p_is(c.paired.p_mcnemar)} on {c.paired.b} vs {c.paired.c} discordant answers."
    )
    return " ".join([text, *caveats(c, level)])


def seeds_needed_text(n: int | None) -> str:
    """The seeds-needed number, or '—' when there is no effect or no spread to plan with."""
    return "—" if n is None else str(n)


def headline_rows(found: list[Comparison]) -> list[Comparison]:
    """The comparisons of the headline: HACPO against GSPO×2 and against GSPO on the mean, per agent."""
    order = {"GSPO×2": 0, "GSPO": 1}
    mine = [c for c in found if c.a == "HACPO" and c.b in order and c.column == "mean"]
    return sorted(mine, key=lambda c: (c.agent, order[c.b]))


def rollout_share(cost: pd.DataFrame, agent: str) -> float:
    """HACPO's rollouts over GSPO×2's for this agent (means over seeds); NaN when either is missing."""
    rollouts = cost[cost["agent"] == agent].set_index("method")["rollouts_total"]
    return ratio(rollouts.get("HACPO", math.nan), rollouts.get("GSPO×2", math.nan))


def headline(found: list[Comparison], cost: pd.DataFrame, level: float, task: str) -> str:
    """The headline sentence: HACPO against GSPO×2 (with its share of the rollouts) and against GSPO, per agent,
    with the across-seed verdicts, and how many agents support H1."""
    rows = headline_rows(found)
    if not rows:
        return "None: the selection lacks HACPO, or both GSPO and GSPO×2, so HACPO was not compared with them."
    pct, parts = round(100 * level), []
    for c in rows:
        share = rollout_share(cost, c.agent) if c.b == "GSPO×2" else math.nan
        rollouts = f", with {num(share, 2)}× its rollouts" if math.isfinite(share) else ""
        across = (
            f"{pct}% CI across {c.seeds.n} seeds {bracket(c.seeds.low, c.seeds.high)}" if c.seeds.n >= 2 else "1 seed"
        )
        parts.append(f"against {c.b} for {c.agent}{rollouts}: {c.verdict} (Δ = {signed(c.seeds.mean)}, {across})")
    text = f"On {task}, HACPO " + "; ".join(parts) + "."
    h1 = [c for c in rows if c.b == "GSPO×2"]
    if h1:
        won = sum(c.verdict == BEAT for c in h1)
        text += f" H1 (HACPO > GSPO×2 with half the rollouts) is supported for {won} of {len(h1)} agents."
    return text
