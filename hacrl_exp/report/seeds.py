"""Per-seed numbers: each run's final accuracy, each agent's start, outlying seeds, and what the seeds varied.

Outlying seed (a collapse when below): for a method M ≠ GSPO and an agent, d_s = M_s − GSPO_s (its own GSPO run at
that seed); with med = median_s d_s and MAD = median_s |d_s − med| (unscaled), seed s is flagged when
|d_s − med| > 3 · max(MAD, 1/N), N = the held-out problems of the agent's evaluation (one problem's share of the
accuracy: a floor, so a method whose seeds all tie within a problem does not flag a one-problem difference). A method
with fewer than MIN_SEEDS seeds paired with GSPO flags nothing. The rule runs on exact fractions (as_fraction): an
accuracy is k/N, and a seed lying exactly on the bound (Table-1 opt_char Naive seed 9: 33/800) is not flagged by a
5.6e-17 float excess.

Collapse (absolute, every method, GSPO included): a run whose final accuracy is below its own start (the step-0
accuracy of that agent and seed, BASE), compared exactly; flagged with direction "below its start" (delta = final −
start). Edge: a final accuracy within rules.EDGE of 0 or 1 (edge_finals), flagged as an agent's start near an edge is.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd

from hacrl_exp.report.load import HELDOUT, ReportData
from hacrl_exp.report.rules import EDGE
from hacrl_exp.report.tables import BASE

OUTLIER_MADS = 3.0
MIN_SEEDS = 5
"""Fewer seeds than this flag nothing: the median and MAD of 3 or 4 values cannot tell an outlier from the spread."""
REFERENCE = "GSPO"
BELOW_START = "below its start"
DENOMINATOR_MAX = 1_000_000
"""An accuracy is k/N with N (problems × categories' lcm) far below this: as_fraction recovers it exactly."""


def as_fraction(x: float) -> Fraction:
    """The exact k/N a float accuracy (or a difference of two) stands for: the closest fraction with denominator
    ≤ DENOMINATOR_MAX (any other such fraction is ≥ 1/N·1e-6 away, while float error is ~1e-16)."""
    return Fraction(float(x)).limit_denominator(DENOMINATOR_MAX)


def _median(values: list[Fraction]) -> Fraction:
    """The exact median: the middle value, or the mean of the two middle ones."""
    ordered, k = sorted(values), len(values)
    return ordered[k // 2] if k % 2 else (ordered[k // 2 - 1] + ordered[k // 2]) / 2


def per_seed_accuracy(final: pd.DataFrame, methods: list[str]) -> pd.DataFrame:
    """Rows (agent, method) with BASE first, one column per seed: that run's final held-out accuracy (mean over
    categories; BASE: the step-0 start)."""
    mean = final[(final["column"] == "mean") & final["method"].isin([BASE, *methods])]
    wide = mean.pivot_table(index=["agent", "method"], columns="seed", values="value", aggfunc="mean")
    order = {m: i for i, m in enumerate([BASE, *methods])}
    return wide.reset_index().sort_values(["agent", "method"], key=lambda s: s.map(order) if s.name == "method" else s)


def warm_starts(data: ReportData, final: pd.DataFrame) -> pd.DataFrame:
    """Per (agent, seed): the step-0 held-out accuracy (start), and when the runs logged them the warm start's
    reached held-out accuracy, its steps and its target (param warm_start.target_accuracy); NaN/None otherwise."""
    start = final[(final["method"] == BASE) & (final["column"] == "mean")].set_index(["agent", "seed"])["value"]
    totals = data.totals.merge(data.runs[["run_id", "agent", "seed"]], on="run_id")
    logged = totals.pivot_table(index=["agent", "seed"], columns="name", values="value", aggfunc="mean")
    out = pd.DataFrame({"start": start})
    for name in ("warm start accuracy", "warm start steps"):
        out[name] = logged[name] if name in logged else np.nan
    out["target"] = data.runs.groupby(["agent", "seed"])["warm_start_target"].first()
    return out.reset_index()


def problems_per_agent(data: ReportData) -> dict[str, int]:
    """The held-out problems in each agent's final evaluation (the largest over its runs)."""
    answers = data.final_problems()
    answers = answers[answers["benchmark"] == HELDOUT].merge(data.runs[["run_id", "agent"]], on="run_id")
    return answers.groupby(["agent", "run_id"])["problem_id"].nunique().groupby("agent").max().to_dict()


def outlying_seeds(final: pd.DataFrame, methods: list[str], problems: dict[str, int]) -> pd.DataFrame:
    """(agent, method, seed, delta, median, mad, bound, direction) of every flagged seed (module docstring): the
    outliers against GSPO (exact fractions; empty when the selection has no GSPO runs), then every run below its own
    start (when the selection has BASE rows)."""
    columns = ["agent", "method", "seed", "delta", "median", "mad", "bound", "direction"]
    mean = final[final["column"] == "mean"]
    rows = []
    for agent in sorted(mean["agent"].unique()):
        mine = mean[mean["agent"] == agent]
        reference = mine[mine["method"] == REFERENCE].groupby("seed")["value"].mean()
        floor = Fraction(1, problems[agent]) if problems.get(agent) else Fraction(0)
        for method in (m for m in methods if m != REFERENCE):
            values = mine[mine["method"] == method].groupby("seed")["value"].mean()
            d = {seed: as_fraction(x) for seed, x in (values - reference).dropna().items()}
            if len(d) < MIN_SEEDS:
                continue
            median = _median(list(d.values()))
            mad = _median([abs(x - median) for x in d.values()])
            bound = Fraction(OUTLIER_MADS) * max(mad, floor)  # exact: 3.0 · Fraction would be a float
            for seed, delta in d.items():
                if abs(delta - median) > bound:
                    rows.append((agent, method, int(seed), float(delta), float(median), float(mad), float(bound),
                                 "below" if delta < median else "above"))  # fmt: skip
    rows += below_start(mean, methods)
    return pd.DataFrame(rows, columns=columns)


def below_start(mean: pd.DataFrame, methods: list[str]) -> list[tuple]:
    """(agent, method, seed, final − start, nan, nan, 0.0, BELOW_START) for every run of `methods` whose final
    accuracy is below its own start (BASE at that agent and seed), compared as exact fractions."""
    start = mean[mean["method"] == BASE].groupby(["agent", "seed"])["value"].mean()
    runs = mean[mean["method"].isin(methods)].groupby(["agent", "method", "seed"])["value"].mean()
    rows = []
    for (agent, method, seed), value in runs.items():
        if (agent, seed) in start.index and as_fraction(value) < as_fraction(start[(agent, seed)]):
            rows.append((agent, method, int(seed), float(value - start[(agent, seed)]), np.nan, np.nan, 0.0,
                         BELOW_START))  # fmt: skip
    return rows


def edge_finals(final: pd.DataFrame, methods: list[str], edge: float = EDGE) -> pd.DataFrame:
    """(agent, method, seed, value, side) of every final mean accuracy within `edge` of 0 ("floor") or 1 ("ceiling"),
    inclusive, compared as exact fractions."""
    mean = final[(final["column"] == "mean") & final["method"].isin(methods)]
    limit = as_fraction(edge)
    rows = []
    for (agent, method, seed), value in mean.groupby(["agent", "method", "seed"])["value"].mean().items():
        x = as_fraction(value)
        if x <= limit or 1 - x <= limit:
            rows.append((agent, method, int(seed), float(value), "floor" if x <= limit else "ceiling"))
    return pd.DataFrame(rows, columns=["agent", "method", "seed", "value", "side"])


def edge_text(flags: pd.DataFrame, edge: float = EDGE) -> str:
    """The sentence flagging the finals near an edge (edge_finals), per agent and method with their seeds."""
    if flags.empty:
        return f"No run ends within {edge} of 0 or 1."
    parts = []
    for (agent, method, side), part in flags.groupby(["agent", "method", "side"], sort=False):
        seeds = ", ".join(str(s) for s in sorted(part["seed"]))
        parts.append(f"{agent} {method} at the {side} (seeds {seeds})")
    return (f"**{len(flags)} runs end within {edge} of 0 or 1**, where a comparison has little room to differ: "
            + "; ".join(parts) + ".")  # fmt: skip


def varied(values: pd.Series, jobs: int) -> str:
    """How one seed tag behaved across the jobs: 'not recorded', 'recorded for k of n jobs: …', 'fixed at v',
    or 'varied (k values)'."""
    recorded = values.dropna()
    if recorded.empty:
        return "not recorded by these runs"
    distinct = sorted(recorded.unique(), key=str)
    part = "" if len(recorded) == jobs else f" (recorded for {len(recorded)} of {jobs} jobs)"
    if len(distinct) == 1:
        return f"fixed at {distinct[0]} in every job{part}"
    return f"varied across the jobs ({len(distinct)} values){part}"


def seed_roles(runs: pd.DataFrame) -> str:
    """Which of the data seed (prompt order) and the held-out seed varied across the selection's jobs, from the
    jobs' tags data_seed and heldout_seed."""
    jobs = runs.drop_duplicates("parent_id")
    data, held = varied(jobs["data_seed"], len(jobs)), varied(jobs["heldout_seed"], len(jobs))
    if jobs["data_seed"].notna().all() and (jobs["data_seed"] == jobs["seed"].astype(str)).all():
        data += ", equal to each job's seed"
    return f"Data seed (the prompt order): {data}. Held-out seed (the held-out problems): {held}."


def grading_policy(runs: pd.DataFrame) -> str:
    """The grading policy of the selection's jobs (param task.grader_forms), flagged when the jobs differ."""
    jobs = runs.drop_duplicates("parent_id")
    policies = jobs["grader_forms"].value_counts()
    if len(policies) > 1:
        listed = ", ".join(f"{p} ({k} jobs)" for p, k in policies.items())
        return f"**{len(policies)} grading policies**: {listed}; their accuracies are not comparable."
    policy = policies.index[0]
    meaning = POLICIES.get(policy, "")
    unlogged = not jobs["grader_forms_logged"].any()
    note = " (these runs predate the setting: the policy they ran under)" if unlogged else ""
    return f"Grading: `task.grader_forms={policy}`{note}" + (f": {meaning}." if meaning else ".")


POLICIES = {
    "requested": 'a correct value in a form the question did not ask for (e.g. 0.625 under "common fraction") '
    "is graded wrong, as documented in docs/evaluation.md",
    "value": "a correct value is graded right in any equivalent form (as math-verify / Minerva-style graders do)",
    "none": "no answer-form rule applies (the arithmetic tiers compare digit strings exactly; task.reward=verl "
    "applies verl's own rule)",
}
