"""The report's first screen: the regime (agents, their start per seed, task, grading, seeds) and the headline.

The headline covers HACPO against each baseline and every other comparison that reached a verdict, on the mean
held-out accuracy: absolute accuracies next to Δ, the seeds A was ahead / tied / behind, the test that decided (its
Holm-adjusted p), and the costs each comparison held equal. Its sentences say no more than the verdicts: "matched"
only from a passing Holm-adjusted TOST, "refuted" with its bound, "not established" otherwise, with the direction.
"""

from __future__ import annotations

import pandas as pd

from hacrl_exp.evaluation.markdown import markdown_table
from hacrl_exp.report.compare import Comparison
from hacrl_exp.report.costs import cost_ratios, held_equal, not_logged
from hacrl_exp.report.rules import CLAIMS, EDGE, MAIN_METHODS, room
from hacrl_exp.report.seeds import grading_policy, seed_roles
from hacrl_exp.report.stats import BEAT, FELL_SHORT, MATCHED, NOT_ESTABLISHED, REFUTED, SYMBOL, UNTESTABLE
from hacrl_exp.report.text import bracket, num, p_is, pval, refutation, seeds_phrase, signed

SHORT = {"generated rollouts": "rollouts", "generated tokens": "gen. tokens", "trained rows": "rows",
         "updates": "updates", "forward tokens": "fwd tokens", "backward tokens": "bwd tokens",
         "process s": "process s", "job process s": "job process s"}  # fmt: skip
"""Short names of the costs (load.TOTALS) in the headline."""
HEADLINE_ORDER = ("GSPO×2", "GSPO (update-matched)", "GSPO", "Naive", "GRPO")
"""HACPO's baselines in the headline: H1's first."""
CEILING = 0.05
"""An agent whose mean start is within this of 0 or 1 is noted: its comparisons have little room to differ."""


def headline_rows(found: list[Comparison]) -> list[Comparison]:
    """The mean-column comparisons of the headline: HACPO against each baseline (the claims family), then every
    other comparison that reached a verdict; per agent in MAIN_METHODS order."""
    order = {m: i for i, m in enumerate(dict.fromkeys((*HEADLINE_ORDER, *reversed(MAIN_METHODS))))}
    mine = [c for c in found if c.column == "mean" and (c.family == CLAIMS or c.verdict != NOT_ESTABLISHED)]
    return sorted(mine, key=lambda c: (c.family != CLAIMS, c.agent, order.get(c.a, 99), order.get(c.b, 99), c.b))


def deciding(c: Comparison) -> str:
    """The Holm-adjusted p of the test behind the verdict: '0.039 (sign-flip)', '< 0.001 (TOST)', …"""
    if c.verdict == MATCHED:
        return f"{pval(c.p_tost_holm)} (TOST)"
    if c.verdict == REFUTED:
        return f"{pval(c.p_refute_holm)} (Δ ≥ {signed(c.effect.value)})"
    return f"{pval(c.p_holm)} (sign-flip)"


def costs_phrase(c: Comparison, cost: pd.DataFrame) -> tuple[str, str]:
    """(the costs held equal, a sentence on the costs that differed and those not logged), A over B."""
    equal, differed = held_equal(cost_ratios(cost, c.agent, c.a, c.b))
    missing = not_logged(cost)
    held = ", ".join(SHORT[n] for n in equal) or "none of the logged costs"
    parts = [f"{num(r, 2)}× {SHORT[n]}" for n, r in differed.items()]
    text = f"{c.a} had {', '.join(parts)} of {c.b}'s" if parts else ""
    if missing:
        text += ("; " if text else "") + f"{', '.join(SHORT.get(n, n) for n in missing)} not logged by these runs"
    return held, text


def headline_sentence(c: Comparison, cost: pd.DataFrame) -> str:
    """One sentence per headline row: verdict, A's and B's mean accuracy over the seeds both ran (`Comparison.means`,
    so that A − B is Δ even where a method lacks a seed), Δ with its interval, direction over seeds, costs."""
    a, b = c.means
    held, differed = costs_phrase(c, cost)
    numbers = f"{num(a)} vs {num(b)}, Δ {signed(c.seeds.mean)} {bracket(c.seeds.low, c.seeds.high)}, {seeds_phrase(c)}"
    if c.verdict in (BEAT, FELL_SHORT):
        text = f"{c.a} {c.verdict} {c.b}: {numbers}; sign-flip Holm {p_is(c.p_holm)}"
    elif c.verdict == MATCHED:
        text = f"{c.a} matched {c.b} within ±{num(c.margin.value)}: {numbers}; TOST Holm {p_is(c.p_tost_holm)}"
        text += f"; {refutation(c)}" if c.refuted else ""
    elif c.verdict == REFUTED:
        text = f"{c.a} vs {c.b}: {refutation(c)}; {numbers}"
    elif c.verdict == UNTESTABLE:
        tested = c.effect.value if c.effect else c.margin.value
        text = (f"{c.a} vs {c.b}: untestable (ceiling), {c.b}'s room {num(room(b, tested, c.effect is None))} is below "
                f"the tested {num(abs(tested))} + {EDGE}; {numbers}")  # fmt: skip
    else:
        text = f"{c.a} vs {c.b}: not established; {numbers}; sign-flip Holm {p_is(c.p_holm)}"
    costs = f" Held equal: {held}" + (f"; {differed}" if differed else "") + "."
    return f"{SYMBOL[c.verdict]} **{c.agent}**: {text}.{costs}"


def headline_markdown(found: list[Comparison], cost: pd.DataFrame, level: float) -> str:
    """The headline table, its sentences, and the note on which numbers are adjusted."""
    rows, sentences, shown = [], [], headline_rows(found)
    for c in shown:
        a, b = c.means
        ahead, tied, behind = c.counts
        rows.append(
            [c.agent, f"{c.a} vs {c.b}", num(a), num(b), signed(c.seeds.mean), bracket(c.seeds.low, c.seeds.high),
             f"{ahead} / {tied} / {behind}", deciding(c), costs_phrase(c, cost)[0], f"{SYMBOL[c.verdict]} {c.verdict}"]
        )  # fmt: skip
        sentences.append(f"- {headline_sentence(c, cost)}")
    if not rows:
        return "None: the selection lacks HACPO or every baseline, and no other comparison reached a verdict."
    pct = round(100 * level)
    headers = ["agent", "A vs B", "A", "B", "Δ", f"{pct}% CI (seeds, not adjusted)", "seeds ahead / tied / behind",
               "Holm p (test)", "held equal", "verdict"]  # fmt: skip
    families = sorted({(c.family, c.tests) for c in shown})
    tests = ", ".join(f"{f}: {m} tests" for f, m in families)
    note = (
        "A and B are mean final held-out accuracies over the seeds both ran. Intervals are "
        f"{pct}% t-intervals of the per-seed differences, not adjusted for multiplicity; p-values and verdicts are "
        f"Holm-adjusted over every test of their family ({tests}). Costs are A's over B's, means over seeds (the Costs "
        "section)."
    )
    return "\n\n".join([markdown_table(headers, rows), "\n".join(sentences), note])


def regime_markdown(runs: pd.DataFrame, starts: pd.DataFrame, problems: dict[str, int], methods: list[str]) -> str:
    """What was trained and how: agents, task, steps, methods, seeds, each agent's start per seed, grading, seeds."""
    seeds = sorted(runs["seed"].unique())
    tasks = ", ".join(sorted(runs["task"].unique()))
    tiers = runs["tiers"].dropna().unique() if "tiers" in runs else []
    task = f"task {tasks}" + (f" (tiers {', '.join(map(str, tiers))})" if len(tiers) else "")
    steps = ", ".join(str(s) for s in sorted(runs["steps"].unique()))
    held = ", ".join(f"{a} {n}" for a, n in sorted(problems.items()))
    lines = [
        f"**Regime.** Agents {', '.join(sorted(runs['agent'].unique()))} on {task}; held-out problems: {held}; "
        f"{steps} training steps; methods {', '.join(methods)}; seeds {', '.join(map(str, seeds))}.",
        start_table(starts, seeds),
    ]
    means = starts.groupby("agent")["start"].mean()
    for agent, mean in means.items():
        if mean >= 1 - CEILING or mean <= CEILING:
            side = "ceiling" if mean >= 1 - CEILING else "floor"
            lines.append(
                f"{agent} starts at {num(mean)} on average, within {CEILING} of the {side}: its comparisons have "
                "little room to show a difference."
            )
    lines += [seed_roles(runs), grading_policy(runs)]
    return "\n\n".join(lines)


def start_table(starts: pd.DataFrame, seeds: list[int]) -> str:
    """Per agent: the step-0 held-out accuracy at each seed, its mean, and the warm start's reached accuracy per
    seed when the runs logged it (with its target)."""
    rows = []
    for agent, part in starts.groupby("agent"):
        by_seed = part.set_index("seed")
        values = " ".join(num(by_seed["start"].get(s, float("nan"))) for s in seeds)
        reached = by_seed["warm start accuracy"]
        warm = " ".join(num(reached.get(s, float("nan"))) for s in seeds)
        # MLflow params hold an unset target as the string "None"; runs from before targets existed hold nothing
        target = [t for t in part["target"].dropna().unique() if str(t) not in ("None", "null", "")]
        if reached.isna().all():
            warm = (
                "not logged by these runs" if target else "no target: a fixed step count (the start is where it landed)"
            )
        warm += f" (target {', '.join(map(str, target))})" if target else ""
        rows.append([agent, num(part["start"].mean()), values, warm])
    headers = ["agent", "start (mean)", f"start per seed ({', '.join(map(str, seeds))})", "warm start reached"]
    return markdown_table(headers, rows)
