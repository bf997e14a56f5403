"""The report's numbers: final accuracies across seeds, paired comparisons, ablations and rollout cost.

Every function takes the tidy frames of `hacrl_exp.report.load.ReportData` and returns plain data (DataFrames or
dataclasses); formatting is `render`'s job. "Final" is each run's last evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from hacrl_exp.algo.algorithms import ALGORITHMS
from hacrl_exp.report.load import HELDOUT, MECHANISM_LABELS, ReportData
from hacrl_exp.report.stats import (
    Interval,
    PairedTest,
    holm,
    mean_t_interval,
    paired_test,
    seed_problem_bootstrap,
    seed_verdict,
    seeds_needed,
    sign_flip_p,
    tost_p,
    verdict,
)

MAIN_METHODS = ("GSPO", "GSPO×2", "GRPO", "Naive", "HACPO")
"""Order of the main methods; in a comparison A is the later one, so HACPO is always A."""
BASELINES = ("GSPO", "GSPO×2")
MAIN, ABLATION = "main", "ablation"
"""The two families of tests Holm adjusts separately (per column): every pair of main methods, HACPO vs ablations."""
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


def main_pairs(methods: list[str]) -> list[tuple[str, str]]:
    """Every pair of the main methods present, (later, earlier) in MAIN_METHODS order: A = the later method."""
    main = [m for m in MAIN_METHODS if m in methods]
    return [(a, b) for i, a in enumerate(main) for b in main[:i]]


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
    answers = data.problems[data.problems["step"] == 0] if method == BASE else final_answers(data.problems)
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


def final_answers(problems: pd.DataFrame) -> pd.DataFrame:
    """The rows of each run's last evaluation (the loader adds step-0 rows for the base)."""
    return problems[problems["step"] == problems.groupby("run_id")["step"].transform("max")]


@dataclass(frozen=True)
class Comparison:
    """Method `a` against method `b` for one agent and column: Δ = a − b."""

    agent: str
    a: str
    b: str
    column: str
    seeds: Interval
    """Δ per seed (paired by seed), mean and t-interval across seeds."""
    paired: PairedTest
    """Per-problem paired bootstrap and McNemar, (seed, problem) pairs pooled over seeds."""
    seeds_won: int
    significance: float = 0.05
    per_seed: tuple[float, ...] = ()
    """The per-seed differences d_s = A_s − B_s (in seed order)."""
    p_sign_flip: float = math.nan
    """Exact sign-flip permutation p of the per-seed differences (the primary test), before adjustment."""
    p_holm: float = math.nan
    """p_sign_flip Holm-adjusted within its family (same column, same family); set by adjust()."""
    p_tost: float = math.nan
    """TOST p of equivalence within ±margin on the per-seed differences."""
    margin: float = 0.02
    family: str = MAIN

    @property
    def verdict(self) -> str:
        """'beat' / 'fell short of' (Holm-adjusted sign-flip p < significance), 'matched' (TOST p < significance),
        else 'not established': the across-seed verdict (stats.seed_verdict)."""
        return seed_verdict(self.seeds.mean, self.p_holm, self.p_tost, self.significance)

    @property
    def runs_verdict(self) -> str:
        """The per-problem verdict on these runs ('beat', 'fell short of', 'was indistinguishable from'): paired
        bootstrap p < significance; it treats the trained runs as fixed."""
        return verdict(self.paired.delta, self.paired.p_bootstrap, self.significance)

    @property
    def sd(self) -> float:
        """Sample SD (divisor n − 1) of the per-seed differences; NaN with fewer than 2 seeds."""
        return float(np.std(self.per_seed, ddof=1)) if len(self.per_seed) >= 2 else math.nan

    @property
    def seeds_needed(self) -> int | None:
        """Seeds for 80% power of a two-sided paired t-test at α = 0.05 to detect the observed mean difference."""
        return seeds_needed(self.seeds.mean, self.sd)


def compare(
    data: ReportData,
    final: pd.DataFrame,
    agent: str,
    a: str,
    b: str,
    column: str = "mean",
    significance: float = 0.05,
    margin: float = 0.02,
    family: str = MAIN,
    **boot,
) -> Comparison | None:
    """Compare methods a and b for one agent at the seeds both have; None when they share no seed."""

    def values(method):
        part = final[(final["agent"] == agent) & (final["method"] == method) & (final["column"] == column)]
        return part.groupby("seed")["value"].mean()

    va, vb = values(a), values(b)
    seeds = sorted(set(va.index) & set(vb.index))
    if not seeds:
        return None
    per_seed = va.loc[seeds] - vb.loc[seeds]
    pairs = problem_pairs(data, agent, a, b, seeds, column)
    if pairs.empty:
        return None
    # held-out 'mean' is a mean over categories: weight 1/|category|; a benchmark's metric is a mean over problems
    is_benchmark = column in set(data.benchmarks["benchmark"])
    weights = None if is_benchmark else 1.0 / pairs.groupby(["seed", "category"])["problem_id"].transform("count")
    test = paired_test(pairs["score_a"], pairs["score_b"], pairs["problem_id"], weights, **boot)
    won = int(np.sum(per_seed.to_numpy() > 0))
    interval = mean_t_interval(per_seed, boot.get("level", 0.95))
    d = tuple(float(x) for x in per_seed.to_numpy())
    return Comparison(
        agent, a, b, column, interval, test, won, significance, d, sign_flip_p(d), math.nan, tost_p(d, margin),
        margin, family,
    )  # fmt: skip


def problem_pairs(data: ReportData, agent: str, a: str, b: str, seeds: list[int], column: str) -> pd.DataFrame:
    """(seed, problem_id, category, score_a, score_b): final answers of a and b at the same seed and problem."""
    runs = data.runs[(data.runs["agent"] == agent) & data.runs["seed"].isin(seeds)]
    scored = final_answers(data.problems).merge(runs[["run_id", "method", "seed"]], on="run_id")
    if column in set(data.benchmarks["benchmark"]):
        scored = scored[scored["benchmark"] == column]
    else:
        scored = scored[scored["benchmark"] == HELDOUT]
        scored = scored if column == "mean" else scored[scored["category"] == column]
    key = ["seed", "problem_id", "category"]
    side_a = scored[scored["method"] == a].groupby(key, as_index=False)["score"].mean()
    side_b = scored[scored["method"] == b].groupby(key, as_index=False)["score"].mean()
    return side_a.merge(side_b, on=key, suffixes=("_a", "_b"))


def comparisons(
    data: ReportData, final: pd.DataFrame, pairs: list[tuple[str, str]], columns: list[str], **settings
) -> list[Comparison]:
    """compare() for every agent, every (a, b) present, every column; sign-flip p Holm-adjusted (adjust())."""
    present = set(data.runs["method"])
    out = []
    for agent in sorted(data.runs["agent"].unique()):
        for a, b in pairs:
            if a in present and b in present:
                for column in columns:
                    found = compare(data, final, agent, a, b, column, **settings)
                    if found is not None:
                        out.append(found)
    return adjust(out)


def adjust(found: list[Comparison]) -> list[Comparison]:
    """Holm-adjust the sign-flip p-values within each family: the comparisons of one family on one column, over
    every agent and pair (so a family is the set of claims made about one outcome)."""
    out = list(found)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(out):
        groups.setdefault((c.family, c.column), []).append(i)
    for members in groups.values():
        adjusted = holm([out[i].p_sign_flip for i in members])
        for i, p in zip(members, adjusted):
            out[i] = replace(out[i], p_holm=float(p))
    return out


def ablation_methods(data: ReportData) -> list[tuple[str, str]]:
    """(mechanism key, method label) for every 'HACPO −X' present with a single mechanism off."""
    present = set(data.runs["method"])
    return [(key, f"HACPO −{short}") for key, short in MECHANISM_LABELS.items() if f"HACPO −{short}" in present]


def cost_table(data: ReportData, final: pd.DataFrame) -> pd.DataFrame:
    """Per (method, agent), means over seeds: rollouts and tokens generated, training seconds, final accuracy,
    its gain over the step-0 accuracy, and that gain per 1000 rollouts."""
    last = data.curves[data.curves["metric"].isin(["rollouts_total", "tokens_total", "seconds"])]
    last = last[last["step"] == last.groupby(["run_id", "metric"])["step"].transform("max")]
    wide = last.pivot_table(index="run_id", columns="metric", values="value").reset_index()
    wide = wide.merge(data.runs[["run_id", "method", "agent", "seed"]], on="run_id")
    mean = final[final["column"] == "mean"]
    acc = mean[mean["method"] != BASE][["run_id", "value"]].rename(columns={"value": "accuracy"})
    base = mean[mean["method"] == BASE][["agent", "seed", "value"]].rename(columns={"value": "base"})
    wide = wide.merge(acc, on="run_id").merge(base, on=["agent", "seed"], how="left")
    wide["gain"] = wide["accuracy"] - wide["base"]
    wide["gain_per_1k_rollouts"] = 1000.0 * wide["gain"] / wide["rollouts_total"].where(wide["rollouts_total"] > 0)
    numeric = ["rollouts_total", "tokens_total", "seconds", "accuracy", "gain", "gain_per_1k_rollouts"]
    table = wide.groupby(["method", "agent"], as_index=False)[numeric].mean()
    return by_agent_then_method(table, methods_in(data))


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


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when the denominator is 0 or missing."""
    return numerator / denominator if denominator and math.isfinite(denominator) else math.nan
