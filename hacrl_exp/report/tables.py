"""The report's numbers: final accuracies across seeds, the ablations present and the mechanism diagnostics.

Every function takes the tidy frames of `hacrl_exp.report.load.ReportData` and returns plain data (DataFrames or
dataclasses); formatting is `render`'s job. "Final" is each run's last evaluation.
"""

from __future__ import annotations

import pandas as pd

from hacrl_exp.algo.algorithms import ALGORITHMS
from hacrl_exp.report.load import HELDOUT, MECHANISM_LABELS, ReportData
from hacrl_exp.report.rules import MAIN_METHODS
from hacrl_exp.report.stats import Interval, mean_t_interval, seed_problem_bootstrap

BASE = "base (step 0)"
"""The warm-started agents before RL: every method's step-0 evaluation at that seed."""


def columns_of(data: ReportData) -> list[str]:
    """Table columns: the held-out categories (eval/accuracy/<category>) in name order, 'mean', then the benchmarks
    of `python -m hacrl_exp.evaluate` runs, if any."""
    keys = data.curves.loc[data.curves["metric"].str.startswith("eval/accuracy/"), "metric"].unique()
    categories = sorted(k.split("/", 2)[2] for k in keys if k != "eval/accuracy/mean")
    return [*categories, "mean", *sorted(data.benchmarks["benchmark"].unique())]


def finals(data: ReportData) -> pd.DataFrame:
    """(run_id, method, agent, seed, step, column, value): each run's last evaluation, plus BASE rows from step 0.

    The values are the logged MLflow metrics eval/accuracy/<column> (the mean over categories for 'mean') and, for a
    benchmark column, the evaluation run's `<benchmark>/<headline>`.
    """
    acc = data.curves[data.curves["metric"].str.startswith("eval/accuracy/")]
    acc = acc.assign(column=acc["metric"].str.split("/", n=2).str[2]).merge(data.runs, on="run_id")
    last = acc[acc["step"] == acc.groupby("run_id")["step"].transform("max")]
    base = acc[acc["step"] == 0].groupby(["agent", "seed", "column"], as_index=False)["value"].mean()
    base = base.assign(method=BASE, run_id="", step=0)
    bench = data.benchmarks.rename(columns={"benchmark": "column"}).merge(data.runs, on="run_id")
    keep = ["run_id", "method", "agent", "seed", "step", "column", "value"]
    return pd.concat([last[keep], base[keep], bench[keep]], ignore_index=True)


def methods_in(data: ReportData, order: tuple[str, ...] = MAIN_METHODS) -> list[str]:
    """The methods present, those in `order` first (in that order), then the rest alphabetically."""
    present = set(data.runs["method"])
    return [m for m in order if m in present] + sorted(present - set(order))


def accuracy_table(
    final: pd.DataFrame,
    methods: list[str],
    columns: list[str],
    level: float,
    data: ReportData | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Rows (agent, method) × columns: Interval of the final accuracy, mean over seeds.

    The interval is the seed-and-problem bootstrap (stats.seed_problem_bootstrap, inside [0, 1]) when `data` holds
    the per-problem answers of those runs (the base row: the step-0 answers); otherwise (a store without them) the
    t-interval across seeds cut to [0, 1], and the row's `interval` says which ("bootstrap" / "t").
    """
    rows = []
    for agent in sorted(final["agent"].unique()):
        for method in methods:
            part = final[(final["agent"] == agent) & (final["method"] == method)]
            if part.empty:
                continue
            row = {"agent": agent, "method": method, "seeds": part["seed"].nunique(), "interval": "bootstrap"}
            for column in columns:
                values = part.loc[part["column"] == column, "value"]
                t_iv = mean_t_interval(values, level)
                matrix = problem_matrix(data, agent, method, column) if data is not None else None
                if matrix is None or t_iv.n == 0:
                    low, high = max(t_iv.low, 0.0), min(t_iv.high, 1.0)  # accuracies: keep the interval in [0, 1]
                    row["interval"] = "t" if t_iv.n else row["interval"]
                else:
                    low, high = seed_problem_bootstrap(*matrix, n_boot=n_boot, seed=seed, level=level)
                row[column] = Interval(t_iv.mean, low, high, t_iv.n)
            rows.append(row)
    return pd.DataFrame(rows)


def problem_matrix(data: ReportData, agent: str, method: str, column: str):
    """(scores (seeds × problems), weights (problems,)) of the final per-problem answers (for BASE: the step-0
    answers), or None without any. Weights are 1/|category| for the held-out mean (a mean over categories, as the
    logged metric), else 1."""
    runs = data.runs[(data.runs["agent"] == agent) & ((data.runs["method"] == method) | (method == BASE))]
    answers = data.problems[data.problems["step"] == 0] if method == BASE else data.final_problems()
    scored = answers.merge(runs[["run_id", "seed"]], on="run_id")
    if column in set(data.benchmarks["benchmark"]):
        scored = scored[scored["benchmark"] == column]
    else:
        scored = scored[scored["benchmark"] == HELDOUT]
        scored = scored if column == "mean" else scored[scored["category"] == column]
    if scored.empty:
        return None
    wide = scored.pivot_table(index="seed", columns="problem_id", values="score", aggfunc="mean")
    if column == "mean" and column not in set(data.benchmarks["benchmark"]):
        category = scored.groupby("problem_id")["category"].first().reindex(wide.columns)
        weights = 1.0 / category.map(category.value_counts()).to_numpy(dtype=float)
    else:
        weights = None
    return wide.to_numpy(dtype=float), weights


def ablation_methods(data: ReportData) -> list[tuple[str, str]]:
    """(mechanism key, method label) for every 'HACPO −X' present with a single mechanism off."""
    present = set(data.runs["method"])
    return [(key, f"HACPO −{short}") for key, short in MECHANISM_LABELS.items() if f"HACPO −{short}" in present]


DIAGNOSTICS = {
    "ω": "cross/omega",
    "P̂": "train/p_hat",
    "1/ρ": "cross/baseline_weight",
    "in-window share": "cross/in_window_share",
    "cross weight": "cross/weight_mean",
    "cross ratio": "cross/ratio_mean",
    "cross rows / step": "cross/rows_run",
}
"""Diagnostics table column → curve (docs/metrics.md): what decides how much a learner takes from its partners."""


def diagnostics_table(data: ReportData, methods: list[str]) -> pd.DataFrame:
    """Per (agent, method) of `methods`: each diagnostic's mean over a run's training steps (step ≥ 1), then the
    mean over seeds; NaN where no run of the method logged it. The cross weight of an algorithm whose objective
    weights no cross row (Naive) is its 1."""
    curves = data.curves[data.curves["metric"].isin(DIAGNOSTICS.values()) & (data.curves["step"] > 0)]
    per_run = curves.groupby(["run_id", "metric"])["value"].mean().unstack()
    runs = data.runs[data.runs["method"].isin(methods)].set_index("run_id")[["agent", "method"]]
    wide = runs.join(per_run.rename(columns={v: k for k, v in DIAGNOSTICS.items()}))
    # Naive's GSPO objective weights no cross row; runs logged before that was resolved carry HACPO's would-be weight
    unweighted = data.runs.set_index("run_id")["algorithm"].map(
        lambda a: a in ALGORITHMS and not ALGORITHMS[a].weighted_cross
    )
    if "cross weight" in wide:
        wide.loc[unweighted.reindex(wide.index, fill_value=False) & wide["cross weight"].notna(), "cross weight"] = 1.0
    table = wide.groupby(["agent", "method"], sort=False).mean(numeric_only=True)
    return by_agent_then_method(table.reindex(columns=list(DIAGNOSTICS)).reset_index(), methods)


def by_agent_then_method(table: pd.DataFrame, methods: list[str]) -> pd.DataFrame:
    """Rows sorted by agent, then by the method's place in `methods`."""
    order = {m: i for i, m in enumerate(methods)}
    return table.sort_values(["agent", "method"], key=lambda s: s.map(order) if s.name == "method" else s)
