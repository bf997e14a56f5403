"""Paired comparisons of two methods for one agent: the across-seed tests, their Holm adjustment, and power.

A comparison's tests (on the per-seed differences d_s = A_s − B_s): the sign-flip test of a difference, the TOST of
equivalence within its margin (when it has one), and the one-sided test that refutes its hypothesised effect (when
it has one). Holm adjusts all of them together within the comparison's family and column (hacrl_exp.report.rules).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from hacrl_exp.report.load import HELDOUT, ReportData
from hacrl_exp.report.power import MAX_SEEDS, RulePower, minimum_detectable_effect, seeds_for_power
from hacrl_exp.report.rules import DEFAULT_RULES, Rules, Stated, effect_for, family_of, margin_for, untestable
from hacrl_exp.report.stats import (
    Interval,
    PairedTest,
    holm,
    mean_t_interval,
    one_sided_upper,
    paired_test,
    refute_p,
    seed_counts,
    seed_verdict,
    sign_flip_p,
    tost_p,
    verdict,
)


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
    per_seed: tuple[float, ...]
    """The per-seed differences d_s = A_s − B_s (in seed order)."""
    family: str
    significance: float = 0.05
    margin: Stated | None = None
    """Equivalence margin of 'matched' and its rationale; None: no equivalence test."""
    effect: Stated | None = None
    """Hypothesised gain of A over B and its source; None: no refutation test."""
    p_sign_flip: float = math.nan
    """Exact sign-flip permutation p of the per-seed differences, before adjustment."""
    p_tost: float = math.nan
    """TOST p of equivalence within ±margin, before adjustment."""
    p_refute: float = math.nan
    """One-sided t-test p of H0: μ ≥ effect, before adjustment."""
    upper: float = math.nan
    """One-sided (1 − significance) upper bound of the mean difference."""
    p_holm: float = math.nan
    """p_sign_flip Holm-adjusted over every test of its family and column (set by adjust())."""
    p_tost_holm: float = math.nan
    p_refute_holm: float = math.nan
    tests: int = 0
    """m: the number of tests Holm adjusted this comparison's p-values over."""
    power: float = math.nan
    """Power of the report's rule at this many seeds, by simulation (hacrl_exp.report.power); mean column only."""
    seeds_for_power: int | None = None
    """Seeds for 80% power under the same simulation; None: more than power.MAX_SEEDS, or nothing to simulate."""
    means: tuple[float, float] = (math.nan, math.nan)
    """A's and B's mean over the seeds both have (those of per_seed), so that A − B is the mean Δ; rederive reads
    them from the report's per_seed_accuracy.csv (NaN when absent: then no ceiling rule)."""
    mde: float = math.nan
    """Minimum detectable effect: the smallest mean Δ the rule detects with 80% power at these seeds and this SD
    (hacrl_exp.report.power.minimum_detectable_effect); inf when no grid of n seeds can pass; mean column only."""

    @property
    def ceiling(self) -> bool:
        """B's room (to 1, or to 0) is below the effect this comparison tests (rules.untestable)."""
        return untestable(self.means[1], self.effect, self.margin)

    @property
    def verdict(self) -> str:
        """beat / fell short of / untestable (ceiling) / matched / refuted / not established (stats.seed_verdict on
        the adjusted p's and the ceiling rule)."""
        return seed_verdict(
            self.seeds.mean, self.p_holm, self.p_tost_holm, self.p_refute_holm, self.significance, self.ceiling
        )

    @property
    def refuted(self) -> bool:
        """The hypothesised effect is excluded: Holm-adjusted refutation p < significance (also under 'matched'),
        and B had room for it (not at the ceiling)."""
        passes = math.isfinite(self.p_refute_holm) and self.p_refute_holm < self.significance
        return passes and not self.ceiling

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
    def counts(self) -> tuple[int, int, int]:
        """(seeds A ahead, tied, behind), ties within ±1e-12 (stats.seed_counts)."""
        return seed_counts(self.per_seed)


def compare(
    data: ReportData,
    final: pd.DataFrame,
    agent: str,
    a: str,
    b: str,
    column: str = "mean",
    rules: Rules = DEFAULT_RULES,
    **boot,
) -> Comparison | None:
    """Compare methods a and b for one agent at the seeds both have; None when they share no seed."""

    def values(method):
        part = final[(final["agent"] == agent) & (final["method"] == method)]
        return part[part["column"] == column].groupby("seed")["value"].mean()

    va, vb = values(a), values(b)
    seeds = sorted(set(va.index) & set(vb.index))
    if not seeds:
        return None
    pairs = problem_pairs(data, agent, a, b, seeds, column)
    if pairs.empty:
        return None
    # held-out 'mean' is a mean over categories: weight 1/|category|; a benchmark's metric is a mean over problems
    is_benchmark = column in set(data.benchmarks["benchmark"])
    weights = None if is_benchmark else 1.0 / pairs.groupby(["seed", "category"])["problem_id"].transform("count")
    test = paired_test(pairs["score_a"], pairs["score_b"], pairs["problem_id"], weights, **boot)
    d = tuple(float(x) for x in (va.loc[seeds] - vb.loc[seeds]).to_numpy())
    found = seed_comparison(agent, a, b, column, d, test, rules, boot.get("level", 0.95))
    return replace(found, means=(float(va.loc[seeds].mean()), float(vb.loc[seeds].mean())))


def seed_comparison(
    agent: str, a: str, b: str, column: str, d, paired: PairedTest, rules: Rules = DEFAULT_RULES, level: float = 0.95
) -> Comparison:
    """The comparison from its per-seed differences d_s = A_s − B_s (seed order) and its per-problem test: family,
    margin and effect by the rules, the unadjusted across-seed tests (sign-flip, TOST, refutation) and the one-sided
    upper bound; Holm and power come after, over the family (adjust(), with_power())."""
    d = tuple(float(x) for x in d)
    margin, effect = margin_for(a, b, rules), effect_for(a, b, rules)
    return Comparison(
        agent, a, b, column, mean_t_interval(d, level), paired, d, family_of(a, b),
        rules.significance, margin, effect, sign_flip_p(d), tost_p(d, margin.value) if margin else math.nan,
        refute_p(d, effect.value) if effect else math.nan, one_sided_upper(d, rules.significance),
    )  # fmt: skip


def problem_pairs(data: ReportData, agent: str, a: str, b: str, seeds: list[int], column: str) -> pd.DataFrame:
    """(seed, problem_id, category, score_a, score_b): final answers of a and b at the same seed and problem."""
    runs = data.runs[(data.runs["agent"] == agent) & data.runs["seed"].isin(seeds) & data.runs["method"].isin([a, b])]
    problems = data.final_problems()
    scored = problems[problems["run_id"].isin(runs["run_id"])].merge(runs[["run_id", "method", "seed"]], on="run_id")
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
    data: ReportData,
    final: pd.DataFrame,
    pairs: list[tuple[str, str]],
    columns: list[str],
    rules: Rules = DEFAULT_RULES,
    power_draws: int = 500,
    **boot,
) -> list[Comparison]:
    """compare() for every agent, every (a, b) present, every column; then Holm over each family (adjust()) and
    the power of the mean column's comparisons (with_power())."""
    present = set(data.runs["method"])
    out = []
    for agent in sorted(data.runs["agent"].unique()):
        for a, b in pairs:
            if a in present and b in present:
                for column in columns:
                    found = compare(data, final, agent, a, b, column, rules, **boot)
                    if found is not None:
                        out.append(found)
    return judged(out, power_draws, boot.get("seed", 0))


def judged(found: list[Comparison], power_draws: int = 500, seed: int = 0) -> list[Comparison]:
    """Holm over each family (adjust()), then the power of the mean column's comparisons (with_power())."""
    return [with_power(c, power_draws, seed) for c in adjust(found)]


def adjust(found: list[Comparison]) -> list[Comparison]:
    """Holm over every test of a family: the sign-flip, TOST and refutation p-values of the comparisons of one
    family on one column, over every agent and pair, adjusted together (NaN ones, e.g. no margin, not counted)."""
    out = list(found)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(out):
        groups.setdefault((c.family, c.column), []).append(i)
    for members in groups.values():
        raw = [p for i in members for p in (out[i].p_sign_flip, out[i].p_tost, out[i].p_refute)]
        adjusted = holm(raw)
        tests = int(np.isfinite(np.asarray(raw, dtype=float)).sum())
        for k, i in enumerate(members):
            flip, tost, refute = (float(p) for p in adjusted[3 * k : 3 * k + 3])
            out[i] = replace(out[i], p_holm=flip, p_tost_holm=tost, p_refute_holm=refute, tests=tests)
    return out


def with_power(c: Comparison, draws: int, seed: int = 0) -> Comparison:
    """The comparison with its power at its seeds, the seeds for 80% power and the minimum detectable effect at its
    seeds (mean column; draws = 0: none)."""
    if c.column != "mean" or draws <= 0 or c.tests == 0:
        return c
    threshold = c.significance / c.tests
    power = RulePower(c.seeds.mean, c.sd, threshold, draws, seed)
    now = power(c.seeds.n) if c.seeds.n <= MAX_SEEDS else math.nan
    mde = minimum_detectable_effect(c.sd, c.seeds.n, threshold, draws=draws, seed=seed)
    return replace(c, power=now, seeds_for_power=seeds_for_power(power), mde=mde)


def main_pairs(methods: list[str], order: tuple[str, ...]) -> list[tuple[str, str]]:
    """Every pair of the main methods present, (later, earlier) in `order`: A = the later method."""
    main = [m for m in order if m in methods]
    return [(a, b) for i, a in enumerate(main) for b in main[:i]]
