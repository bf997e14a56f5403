"""Sentences of the report, generated from the numbers (never written by hand), and number formatting."""

from __future__ import annotations

import math

import pandas as pd

from hacrl_exp.report.stats import FELL_SHORT, INDISTINGUISHABLE, Interval
from hacrl_exp.report.tables import Comparison, ratio


def num(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def signed(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.{digits}f}"


def pval(p: float) -> str:
    """'0.042', or '< 0.001'."""
    return "n/a" if not math.isfinite(p) else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def p_is(p: float) -> str:
    """'p = 0.042', or 'p < 0.001'."""
    text = pval(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def interval(iv: Interval | None, digits: int = 3) -> str:
    """'0.452 ± 0.031' (mean ± half-width of the CI), or just the mean for a single seed."""
    if iv is None or iv.n == 0:
        return ""
    return num(iv.mean, digits) if iv.n < 2 else f"{num(iv.mean, digits)} ± {num(iv.half_width, digits)}"


def bracket(low: float, high: float) -> str:
    return f"[{signed(low)}, {signed(high)}]"


def sentence(c: Comparison, level: float) -> str:
    """'HACPO beat GSPO×2 for gpt2_bpe: Δ = +0.042 …' with every number the verdict rests on."""
    pct, seeds = round(100 * level), c.seeds
    text = (
        f"{c.a} {c.verdict} {c.b} for {c.agent}: Δ = {signed(c.paired.delta)} in held-out accuracy "
        f"(paired bootstrap over {c.paired.problems} problems × {seeds.n} seed{'s' * (seeds.n != 1)}: "
        f"{pct}% CI {bracket(c.paired.low, c.paired.high)}, {p_is(c.paired.p_bootstrap)}; "
        f"exact McNemar {p_is(c.paired.p_mcnemar)} on {c.paired.b} vs {c.paired.c} discordant answers"
    )
    if seeds.n >= 2:
        text += f"; across seeds {pct}% CI {bracket(seeds.low, seeds.high)}, {c.a} ahead in {c.seeds_won} of {seeds.n}"
    text += ")."
    if c.verdict != INDISTINGUISHABLE and seeds.n >= 2 and not seeds.excludes_zero():
        text += (
            f" The across-seed interval includes 0: with {seeds.n} seeds the difference is not established "
            "across training runs."
        )
    return text


def headline(found: list[Comparison], cost: pd.DataFrame, level: float, task: str) -> str:
    """The closing note: did HACPO, with half the rollouts, match or beat GSPO×2, agent by agent."""
    mine = [c for c in found if c.a == "HACPO" and c.b == "GSPO×2" and c.column == "mean"]
    if not mine:
        return "**Headline.** None: the selection lacks HACPO or GSPO×2 runs, so the two were not compared."
    pct, parts = round(100 * level), []
    for c in mine:
        rollouts = cost[(cost["agent"] == c.agent)].set_index("method")["rollouts_total"]
        share = ratio(rollouts.get("HACPO", math.nan), rollouts.get("GSPO×2", math.nan))
        across = f"{bracket(c.seeds.low, c.seeds.high)} across {c.seeds.n} seeds" if c.seeds.n >= 2 else "1 seed"
        parts.append(
            f"for {c.agent}, with {num(share, 2)}× the rollouts of GSPO×2, HACPO {c.verdict} it "
            f"(Δ = {signed(c.paired.delta)}; {pct}% CI {bracket(c.paired.low, c.paired.high)} over problems, "
            f"{across}; paired bootstrap {p_is(c.paired.p_bootstrap)})"
        )
    good = sum(c.verdict != FELL_SHORT for c in mine)
    return (
        f"**Headline.** On {task}: " + "; ".join(parts) + f". So HACPO matched (no significant difference) or beat "
        f"GSPO×2 for {good} of {len(mine)} agents" + (", i.e. all of them." if good == len(mine) else ".")
    )
