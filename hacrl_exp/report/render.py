"""Markdown sections of the report from computed tables, and the HTML page (markdown-it, installed with rich)."""

from __future__ import annotations

import html

import pandas as pd

from hacrl_exp.evaluation.report import markdown_table
from hacrl_exp.report.stats import BEAT, FELL_SHORT
from hacrl_exp.report.tables import BASE, Comparison
from hacrl_exp.report.text import bracket, interval, num, pval, sentence, signed

PAPER_REFS = {
    "capability_advantage": "paper Table 2, HACPO − Adv: the unweighted joint baseline",
    "omega": "paper Table 3, HACPO − ω: cross loss weight 1, baseline weights kept",
    "exponential_is": "paper Table 4 at α = 0: no exponential importance sampling",
    "stepwise": "paper Fig. 4, no Stepwise: static cross window [1 − δ, 1]",
    "clip": "paper Fig. 4, no Clip: the raw cross ratio",
}
MARK = {BEAT: "▲", FELL_SHORT: "▼"}
"""Marks on a Δ cell: significantly above (▲) or below (▼) zero; no mark: not significant."""


def accuracy_markdown(table: pd.DataFrame, columns: list[str]) -> str:
    """Table-1 style: one row per agent and method, 'mean ± CI half-width' per category and for the mean."""
    rows = [[r["agent"], r["method"], r["seeds"], *(interval(r[c]) for c in columns)] for _, r in table.iterrows()]
    return markdown_table(["agent", "method", "seeds", *columns], rows)


def delta_markdown(found: list[Comparison], columns: list[str], level: float) -> str:
    """One row per (agent, A vs B): Δ = A − B per category (▲/▼ where significant) and the full test on the mean."""
    pct, rows = round(100 * level), []
    index = {(c.agent, c.a, c.b, c.column): c for c in found}
    for c in (c for c in found if c.column == "mean"):
        cells = []
        for column in columns:
            one = index.get((c.agent, c.a, c.b, column))
            cells.append(f"{signed(one.paired.delta)}{MARK.get(one.verdict, '')}" if one else "")
        seeds = bracket(c.seeds.low, c.seeds.high) if c.seeds.n >= 2 else "n/a"
        rows.append(
            [c.agent, f"{c.a} vs {c.b}", *cells, bracket(c.paired.low, c.paired.high), seeds,
             pval(c.paired.p_bootstrap), pval(c.paired.p_mcnemar), f"{c.seeds_won}/{c.seeds.n}", c.verdict]
        )  # fmt: skip
    headers = ["agent", "A vs B", *[f"Δ {c}" for c in columns]]
    headers += [f"Δ mean: {pct}% CI (problems)", f"{pct}% CI (seeds)", "p bootstrap", "p McNemar"]
    headers += ["seeds ahead", "verdict"]
    return markdown_table(headers, rows)


def cost_markdown(cost: pd.DataFrame) -> str:
    """Rollout cost per method and agent (means over seeds)."""
    rows = [
        [r.agent, r.method, f"{r.rollouts_total:.0f}", f"{r.tokens_total:.0f}", num(r.seconds, 1), num(r.accuracy),
         signed(r.gain), signed(r.gain_per_1k_rollouts, 4)]
        for r in cost.itertuples()
    ]  # fmt: skip
    headers = ["agent", "method", "rollouts", "tokens", "training s (job)", "final accuracy", "gain vs step 0"]
    return markdown_table(headers + ["gain per 1k rollouts"], rows)


def selection_markdown(runs: pd.DataFrame, selection: str, skipped: list[str]) -> str:
    """What the report read: the filter, and per method the agents, seeds and final steps."""
    lines = [f"Runs: MLflow {selection}."]
    rows = []
    for method, part in runs.groupby("method", sort=False):
        seeds = ", ".join(str(s) for s in sorted(part["seed"].unique()))
        steps = ", ".join(str(s) for s in sorted(part["final_step"].unique()))
        rows.append([method, ", ".join(sorted(part["agent"].unique())), seeds, steps])
    lines.append(markdown_table(["method", "agents", "seeds", "final evaluation step"], rows))
    if skipped:
        lines.append(f"Left out ({len(skipped)}): " + "; ".join(skipped[:20]) + (" …" if len(skipped) > 20 else ""))
    return "\n\n".join(lines)


def findings_markdown(found: list[Comparison], level: float) -> str:
    """One bullet per comparison on the mean accuracy, generated from its numbers."""
    return "\n".join(f"- {sentence(c, level)}" for c in found if c.column == "mean")


def base_note() -> str:
    return f"`{BASE}` is the warm-started agent before RL (every method's step-0 evaluation at that seed)."


def alpha_markdown(best: pd.DataFrame) -> str:
    rows = [[r.study, r.learner, r.source, num(r.alpha, 3), num(r.value), r.trials] for r in best.itertuples()]
    return markdown_table(["study", "learner", "source", "best α", "objective", "trials"], rows)


CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;line-height:1.45}
table{border-collapse:collapse;margin:1em 0;font-size:0.85em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td:first-child,td:nth-child(2){text-align:left}img{max-width:100%}code{background:#f6f6f6}"""


def to_html(markdown: str, title: str) -> str:
    """A standalone HTML page of the Markdown (tables enabled); images stay relative links to plots/."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(markdown)
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{CSS}</style></head>\n<body>\n{body}</body></html>\n"
    )
