"""Markdown sections of the report from computed tables, and the HTML page (markdown-it, installed with rich)."""

from __future__ import annotations

import html

import pandas as pd

from hacrl_exp.evaluation.report import markdown_table
from hacrl_exp.report.claims import hypothesis_rows
from hacrl_exp.report.stats import SYMBOL
from hacrl_exp.report.tables import BASE, Comparison
from hacrl_exp.report.text import (
    bracket,
    headline,
    headline_rows,
    interval,
    num,
    pval,
    seeds_needed_text,
    sentence,
    signed,
)

PAPER_REFS = {
    "capability_advantage": "paper Table 2, HACPO − Adv: the unweighted joint baseline",
    "omega": "paper Table 3, HACPO − ω: cross loss weight 1, baseline weights kept",
    "exponential_is": "paper Table 4 at α = 0: no exponential importance sampling",
    "stepwise": "paper Fig. 4, no Stepwise: static cross window [1 − δ, 1]",
    "clip": "paper Fig. 4, no Clip: the raw cross ratio",
}


def legend(significance: float, margin: float) -> str:
    """What the verdict symbols mean."""
    return (
        f"Verdicts (across seeds, paired by seed): {SYMBOL['beat']} A above B and {SYMBOL['fell short of']} A below B "
        f"(Holm-adjusted exact sign-flip p < {significance}); {SYMBOL['matched']} matched: equivalent within "
        f"±{num(margin)} (TOST p < {significance}); {SYMBOL['not established']} not established (neither). "
        "Columns marked *these runs* test over the problems of the trained runs, holding them fixed; they do not "
        "speak to training randomness and never set a verdict."
    )


def accuracy_markdown(table: pd.DataFrame, columns: list[str]) -> str:
    """Table-1 style: one row per agent and method, 'mean [low, high]' per category and for the mean; a † marks a
    row whose interval is the t-interval across seeds (no per-problem answers) instead of the bootstrap."""
    rows = [
        [r["agent"], r["method"] + (" †" if r.get("interval") == "t" else ""), r["seeds"],
         *(interval(r[c]) for c in columns)]
        for _, r in table.iterrows()
    ]  # fmt: skip
    return markdown_table(["agent", "method", "seeds", *columns], rows)


def delta_markdown(found: list[Comparison], columns: list[str], level: float) -> str:
    """One row per (agent, A vs B): Δ = A − B per category with its verdict symbol (each column its own Holm
    family), the across-seed tests on the mean, and the per-problem tests on these runs."""
    pct, rows = round(100 * level), []
    index = {(c.agent, c.a, c.b, c.column): c for c in found}
    for c in (c for c in found if c.column == "mean"):
        cells = []
        for column in columns:
            one = index.get((c.agent, c.a, c.b, column))
            cells.append(f"{signed(one.seeds.mean)} {SYMBOL[one.verdict]}" if one else "")
        seeds = bracket(c.seeds.low, c.seeds.high) if c.seeds.n >= 2 else "n/a"
        rows.append(
            [c.agent, f"{c.a} vs {c.b}", *cells, seeds, pval(c.p_sign_flip), pval(c.p_holm), pval(c.p_tost),
             f"{c.seeds_won}/{c.seeds.n}", seeds_needed_text(c.seeds_needed), c.verdict,
             bracket(c.paired.low, c.paired.high), pval(c.paired.p_bootstrap), pval(c.paired.p_mcnemar)]
        )  # fmt: skip
    headers = ["agent", "A vs B", *[f"Δ {c}" for c in columns]]
    headers += [f"{pct}% CI (seeds)", "p sign-flip", "p Holm", "p TOST", "seeds ahead", "seeds needed", "verdict"]
    headers += [f"these runs: {pct}% CI (problems)", "these runs: p bootstrap", "these runs: p McNemar"]
    return markdown_table(headers, rows)


def headline_markdown(found: list[Comparison], cost: pd.DataFrame, level: float, task: str) -> str:
    """The headline table (HACPO vs GSPO×2 and vs GSPO per agent) and its generated sentence."""
    pct, rows = round(100 * level), []
    for c in headline_rows(found):
        seeds = bracket(c.seeds.low, c.seeds.high) if c.seeds.n >= 2 else "n/a"
        rows.append(
            [c.agent, f"HACPO vs {c.b}", signed(c.seeds.mean), seeds, bracket(c.paired.low, c.paired.high),
             pval(c.p_holm), f"{SYMBOL[c.verdict]} {c.verdict}"]
        )  # fmt: skip
    headers = ["agent", "comparison", "Δ", f"{pct}% CI across seeds", f"{pct}% CI over problems (these runs)"]
    table = markdown_table([*headers, "p Holm (seeds)", "verdict"], rows) if rows else ""
    return "\n\n".join(filter(None, [table, headline(found, cost, level, task)]))


def hypotheses_markdown(found: list[Comparison], methods: list[str], agents: list[str], level: float) -> str:
    """One row per hypothesis and agent: the comparison, its across-seed interval and adjusted p, the verdict and
    the seeds a paired t-test would need (80% power, α = 0.05) to detect the observed difference."""
    pct, rows = round(100 * level), []
    for h, agent, c, judged in hypothesis_rows(found, methods, agents):
        if c is None:
            rows.append([h.key, h.claim, agent, f"{h.a} vs {h.b}", "", "", "", judged, ""])
            continue
        seeds = bracket(c.seeds.low, c.seeds.high) if c.seeds.n >= 2 else "n/a"
        rows.append(
            [h.key, h.claim, agent, f"{c.a} vs {c.b}", signed(c.seeds.mean), seeds, pval(c.p_holm), judged,
             seeds_needed_text(c.seeds_needed)]
        )  # fmt: skip
    headers = ["", "claim", "agent", "comparison", "Δ", f"{pct}% CI across seeds", "p Holm", "verdict"]
    return markdown_table([*headers, "seeds needed"], rows)


def diagnostics_markdown(table: pd.DataFrame) -> str:
    """The diagnostics table; a value no run logged is n/a."""
    columns = [c for c in table.columns if c not in ("agent", "method")]
    digits = {"cross rows / step": 1}
    rows = [[r["agent"], r["method"], *(num(r[c], digits.get(c, 3)) for c in columns)] for _, r in table.iterrows()]
    return markdown_table(["agent", "method", *columns], rows)


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
    lines.append(code_versions(runs))
    if {"job_start", "job_end"} <= set(runs.columns):
        lines.append(wall_clock(runs))
    if skipped:
        lines.append(f"Left out ({len(skipped)}): " + "; ".join(skipped[:20]) + (" …" if len(skipped) > 20 else ""))
    return "\n\n".join(lines)


def code_versions(runs: pd.DataFrame) -> str:
    """The git commits the jobs ran from, with job counts; more than one commit, or uncommitted changes, is flagged
    (the methods may then differ in more than the method)."""
    if "commit" not in runs:
        return "Code: unknown (the runs carry no git commit)."
    jobs = runs.drop_duplicates("parent_id")
    counts = jobs.groupby("commit")["parent_id"].count().sort_values(ascending=False)
    listed = ", ".join(f"`{commit}` ({n} job{'s' * (n != 1)})" for commit, n in counts.items())
    dirty = int(jobs["dirty"].sum()) if "dirty" in jobs else 0
    flags = []
    if len(counts) > 1:
        flags.append(f"**{len(counts)} code versions**: compare methods run from one commit, or check the diff")
    if dirty:
        flags.append(f"**{dirty} job{'s' * (dirty != 1)} ran with uncommitted changes**")
    return f"Code: git commit {listed}." + (" " + "; ".join(flags) + "." if flags else "")


def wall_clock(runs: pd.DataFrame) -> str:
    """When the jobs ran and the sum of their wall-clock times (what a grid costs at one job at a time)."""
    jobs = runs.drop_duplicates("parent_id")
    start, end = pd.to_datetime(jobs["job_start"]), pd.to_datetime(jobs["job_end"])
    hours = (end - start).dt.total_seconds().sum() / 3600
    span = f"{start.min():%Y-%m-%d %H:%M} to {end.max():%Y-%m-%d %H:%M} UTC"
    return f"Wall-clock: {len(jobs)} jobs from {span}; the jobs' own times sum to {hours:.2f} h."


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
