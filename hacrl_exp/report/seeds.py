"""Per-seed numbers: each run's final accuracy, each agent's start, outlying seeds, and what the seeds varied.

Outlying seed (a collapse when below): for a method M ≠ GSPO and an agent, d_s = M_s − GSPO_s (its own GSPO run at
that seed); with med = median_s d_s and MAD = median_s |d_s − med| (unscaled), seed s is flagged when
|d_s − med| > 3 · max(MAD, 1/N), N = the held-out problems of the agent's evaluation (one problem's share of the
accuracy: a floor, so a method whose seeds all tie within a problem does not flag a one-problem difference). A method
with fewer than MIN_SEEDS seeds paired with GSPO flags nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hacrl_exp.report.load import HELDOUT, ReportData
from hacrl_exp.report.tables import BASE

OUTLIER_MADS = 3.0
MIN_SEEDS = 5
"""Fewer seeds than this flag nothing: the median and MAD of 3 or 4 values cannot tell an outlier from the spread."""
REFERENCE = "GSPO"


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
    """(agent, method, seed, delta, median, mad, bound, direction) of every flagged seed (module docstring);
    empty when the selection has no GSPO runs."""
    columns = ["agent", "method", "seed", "delta", "median", "mad", "bound", "direction"]
    mean = final[final["column"] == "mean"]
    rows = []
    for agent in sorted(mean["agent"].unique()):
        mine = mean[mean["agent"] == agent]
        reference = mine[mine["method"] == REFERENCE].groupby("seed")["value"].mean()
        floor = 1.0 / problems[agent] if problems.get(agent) else 0.0
        for method in (m for m in methods if m != REFERENCE):
            values = mine[mine["method"] == method].groupby("seed")["value"].mean()
            d = (values - reference).dropna()
            if len(d) < MIN_SEEDS:
                continue
            median = float(d.median())
            mad = float((d - median).abs().median())
            bound = OUTLIER_MADS * max(mad, floor)
            for seed, delta in d[(d - median).abs() > bound].items():
                rows.append((agent, method, int(seed), float(delta), median, mad, bound,
                             "below" if delta < median else "above"))  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


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
