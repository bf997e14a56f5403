"""The report's sections after the first screen, each a list of Markdown lines; the figures they show are drawn here.

`Built` carries what every section reads (the config, data, finals, comparisons, tables) and the output folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hacrl_exp.algo.algorithms import ALGORITHMS
from hacrl_exp.config.report_schema import ReportConfig
from hacrl_exp.report import plots, render
from hacrl_exp.report.compare import Comparison
from hacrl_exp.report.costs import JOB_SECONDS_NOTE, comparison_ratios
from hacrl_exp.report.load import ReportData
from hacrl_exp.report.rules import ABLATIONS, BASELINES, CLAIMS, FAMILY_TITLES
from hacrl_exp.report.seeds import edge_finals, edge_text, outlying_seeds, per_seed_accuracy
from hacrl_exp.report.tables import BASE, diagnostics_table


@dataclass
class Built:
    config: ReportConfig
    data: ReportData
    final: pd.DataFrame
    found: list[Comparison]
    accuracy: pd.DataFrame
    cost: pd.DataFrame
    columns: list[str]
    """Table 1's columns: the held-out categories, 'mean', then any benchmarks (tables.columns_of)."""
    methods: list[str]
    main: list[str]
    ablations: list[tuple[str, str]]
    problems: dict[str, int]
    out: Path

    @property
    def agents(self) -> list[str]:
        return sorted(self.data.runs["agent"].unique())

    @property
    def pct(self) -> int:
        return round(100 * self.config.level)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def forest(b: Built) -> list[str]:
    """The paired differences of every mean-column comparison, by family (plots.forest_plot)."""
    order = [CLAIMS, BASELINES, ABLATIONS]
    mine = sorted((c for c in b.found if c.column == "mean"), key=lambda c: (order.index(c.family), c.agent))
    if not mine:
        return []
    rows = [(f"{c.agent}: {c.a} vs {c.b}", c.per_seed, c.verdict, c.margin.value if c.margin else None,
             c.effect.value if c.effect else None, c.family) for c in mine]  # fmt: skip
    plots.forest_plot(rows, b.out / "plots" / "forest.png", b.config.level, b.config.significance)
    thick = round(100 * (1 - 2 * b.config.significance))
    return [
        f"Every comparison's per-seed differences, one row per comparison and agent: the marker is the mean Δ "
        f"(its shape and colour the verdict), the thin line its {b.pct}% and the thick line its {thick}% t-interval "
        f"across seeds (not adjusted; the thick line's ends are the one-sided bounds the TOST and the refutation test "
        f"use), the shaded band ± its margin, the orange tick its hypothesised δ.",
        "", "![paired differences](plots/forest.png)", "",
    ]  # fmt: skip


def costs(b: Built) -> list[str]:
    return [
        "What each method spent per agent, means over seeds: generated rollouts and tokens, trained rows, optimizer "
        "updates, forward and backward tokens, the agent's process seconds (CPU/GPU time, not wall-clock), the job's "
        "process seconds, and the job's wall-clock training seconds (depends on the machine's load: for reference "
        "only). A comparison holds a cost equal when A's mean is B's within ±0.5%.", "",
        render.cost_markdown(b.cost), "", JOB_SECONDS_NOTE, "",
        "Every comparison's cost ratios (A's over B's, means over seeds): trained rows and backward tokens are what a "
        "learner trains on; the last column names which of process s and backward tokens is held closest to equal.",
        "", ratios_markdown(comparison_ratios(mean_pairs(b.found), b.cost)), "",
    ]  # fmt: skip


def mean_pairs(found: list[Comparison]) -> list[tuple[str, str, str]]:
    """(agent, A, B) of every mean-column comparison, in report order."""
    return [(c.agent, c.a, c.b) for c in found if c.column == "mean"]


def ratios_markdown(ratios: pd.DataFrame) -> str:
    """The comparison_ratios table: ratios to 2 decimals ('not logged' when NaN)."""
    from hacrl_exp.evaluation.markdown import markdown_table
    from hacrl_exp.report.text import num

    rows = [[*r[:2], *(num(x, 2) if x == x else "not logged" for x in r[2:-1]), r[-1] or "n/a"]
            for r in ratios.itertuples(index=False)]  # fmt: skip
    return markdown_table(list(ratios.columns), rows) if rows else "No comparison."


def per_seed(b: Built) -> list[str]:
    """Final accuracy per method × agent × seed (the base row: the step-0 start), and the outlying seeds."""
    table = per_seed_accuracy(b.final, b.methods)
    table.to_csv(b.out / "tables" / "per_seed_accuracy.csv", index=False)
    flags = outlying_seeds(b.final, b.methods, b.problems)
    flags.to_csv(b.out / "tables" / "outlying_seeds.csv", index=False)
    md = [f"Final held-out accuracy (mean over categories) of every run; `{BASE}` is the step-0 start.", "",
          render.per_seed_markdown(table), "", "### Outlying seeds", "",
          "A seed is flagged when its Δ against its own GSPO run lies more than 3 MADs (unscaled; at least one "
          "problem's share of the accuracy, 1/N) from the median Δ of its method's seeds (exact fractions), and a "
          "run is flagged when it ends below its own start (side 'below its start').", "",
          render.outliers_markdown(flags), "", edge_text(edge_finals(b.final, b.methods)), ""]  # fmt: skip
    if not flags.empty:
        plots.outlier_curves(b.data, flags, b.out / "plots" / "outlying_seeds.png")
        md += ["![outlying seeds: their curves](plots/outlying_seeds.png)", ""]
    return md


def comparisons_by_family(b: Built) -> list[str]:
    md = []
    for family in (CLAIMS, BASELINES):
        mine = [c for c in b.found if c.family == family]
        md += [f"### {FAMILY_TITLES[family]}", "", render.findings_markdown(mine, b.config.level) or "None.", ""]
    return md


def ablations(b: Built) -> list[str]:
    mine = [c for c in b.found if c.family == ABLATIONS]
    if not b.ablations:
        return ["No ablation runs (HACPO with one mechanism off) in this selection.", ""]
    md = [render.delta_markdown(mine, b.columns, b.config.level), ""]
    for key, method in b.ablations:
        part = b.accuracy[b.accuracy["method"].isin(["HACPO", method])]
        md += [f"### {method} ({render.PAPER_REFS[key]})", "", render.accuracy_markdown(part, b.columns), ""]
        md += [render.findings_markdown([c for c in mine if c.b == method], b.config.level), ""]
    return md


def curves(b: Built) -> list[str]:
    md = []
    sets = [("main", b.main, "main methods"), ("ablations", ["HACPO", *[m for _, m in b.ablations]],
            "HACPO and its ablations")]  # fmt: skip
    for agent in b.agents:
        for label, chosen, title in sets:
            if label == "ablations" and not b.ablations:
                continue
            path = b.out / "plots" / f"curves_{label}_{slug(agent)}.png"
            plots.learning_curves(b.data, agent, chosen, path, b.config.level, title)
            md += [f"![{agent} {title}: learning curves](plots/{path.name})", ""]
        path = plots.reward_curves(b.data, agent, b.methods, b.out / "plots" / f"reward_{slug(agent)}.png")
        md += [f"![{agent} training reward](plots/{path.name})", ""]
    md += ["The third panel's x axis is the agent's process seconds when every run logged them, else the job's "
           "wall-clock training time (rollout, scoring and updates of all its agents; evaluations excluded), which "
           "depends on the machine's load.", ""]  # fmt: skip
    return md


def sharing_methods(data: ReportData, methods: list[str]) -> list[str]:
    """The methods (in `methods` order) whose algorithm learns from its partners' rollouts."""
    shares = data.runs["algorithm"].map(lambda a: a in ALGORITHMS and ALGORITHMS[a].shares_rollouts)
    present = set(data.runs.loc[shares, "method"])
    return [m for m in methods if m in present]


def uses_omega(data: ReportData) -> set[str]:
    """The methods whose objective applies ω: an algorithm that weights cross rows, with mechanisms.omega on."""
    weighted = data.runs["algorithm"].map(lambda a: a in ALGORITHMS and ALGORITHMS[a].weighted_cross)
    return {m for m in data.runs.loc[weighted, "method"] if "−ω" not in m.split()}


def mechanisms(b: Built) -> list[str]:
    md = ["Per agent, one column per method that shares rollouts: ω (the cross loss weight, log axis, only where the "
          "method applies it), P̂ (the capability estimate) and the share of cross rows inside the window, at every "
          "step; thin lines are seeds, the thick line their mean. Read from the runs' metrics cross/omega, "
          "train/p_hat and cross/in_window_share.", ""]  # fmt: skip
    sharing = sharing_methods(b.data, b.methods)
    users = uses_omega(b.data)
    for agent in b.agents:
        path, notes = plots.mechanism_curves(
            b.data, agent, sharing, b.out / "plots" / f"mechanisms_{slug(agent)}.png", users
        )
        if path is not None:
            md += [f"![{agent} mechanisms](plots/{path.name})", ""]
        md += [f"- {note}" for note in notes] + ([""] if notes else [])
    diagnostics = diagnostics_table(b.data, sharing)
    diagnostics.to_csv(b.out / "tables" / "diagnostics.csv", index=False)
    md += ["Each diagnostic's mean over a run's training steps, then over seeds: ω, P̂, the baseline weight 1/ρ "
           "(cross/baseline_weight), the in-window share, the cross rows' mean effective weight and ratio "
           "(cross/weight_mean, cross/ratio_mean), and the cross rows run per step (docs/metrics.md). ω and 1/ρ are "
           "logged as computed, also by a method that does not apply them (Naive, HACPO −ω, HACPO −Adv).", "",
           render.diagnostics_markdown(diagnostics), ""]  # fmt: skip
    return md


STATS_TEXT = """\
- **Across seeds (the primary tests; the only ones that set a verdict)**: a method's accuracy is one value per seed
  (that run's final evaluation). A comparison pairs A and B by seed (same warm start; same held-out problems unless
  the held-out seed varies): d_s = A_s − B_s.
  - *Paired t-interval*: d̄ ± t(n−1) · s_d/√n, the {pct}% interval of the mean difference (s_d with divisor n − 1).
  - *Sign-flip p* (a difference): the exact permutation test, p = #{{ε ∈ {{±1}}^n : |Σ ε_s d_s| ≥ |Σ d_s|}} / 2^n;
    valid for any n, but never below 2/2^n.
  - *TOST* (equivalence within ±m): p = max of the one-sided t-test p-values of H0: μ ≤ −m and H0: μ ≥ +m. The
    margin m of each comparison is in the Margins table: half the effect the paper reports for that pair, or the
    user's `equivalence_margin` with its reason; no TOST where there is neither.
  - *Refutation* (of a claim's hypothesised gain δ): the one-sided t-test of H0: μ ≥ δ, p = P[T(n−1) ≤
    (d̄ − δ)/(s_d/√n)]; p < {sig} ⟺ the one-sided {one}% upper bound d̄ + t(n−1) · s_d/√n lies below δ.
  - *Holm over every test of a family*: the sign-flip, TOST and refutation p-values of all comparisons of one family
    (claims: HACPO against each baseline; baselines: the other main pairs; ablations: HACPO against each ablation),
    per column, over agents, adjusted together: p_(1) ≤ … ≤ p_(m), adjusted p_(i) = max_{{j ≤ i}} min(1,
    (m − j + 1) · p_(j)). Intervals are not adjusted.
  - *Verdict*, first that passes (adjusted p < {sig}): "beat" ▲ / "fell short of" ▼ (sign-flip, Δ above / below 0);
    "matched" ≈ (TOST); "refuted" ✗ (refutation); else "not established" ○. A hypothesis is contradicted when A fell
    short of B, supported when A beat B ("smaller than hypothesised" if δ is also refuted), refuted when δ is, else
    not established.
  - *Seeds ahead / tied / behind*: d_s > 1e-12, |d_s| ≤ 1e-12, d_s < −1e-12 (accuracies are counts over totals:
    a smaller difference is rounding).
  - *Power of the report's rule*: the share of {draws} simulated grids (`power_draws`; d_s drawn from a normal with the
    observed d̄ and s_d) whose sign-flip p passes Holm's first step, p < {sig}/m with m the tests of the family (a
    lower bound of the power under Holm); exact over the 2^n sign patterns up to 11 seeds, a saddlepoint
    approximation beyond (hacrl_exp/report/power.py). "80% at": the fewest seeds with power ≥ 0.8 (searched to 32).
- **These runs, per problem (secondary; never sets a verdict)**: at one seed every method starts from the same weights
  and answers the same held-out problems. Pairs are (seed, problem), pooled over seeds. Δ weights each problem by
  1/(size of its category), so it equals the difference of the accuracy means. These tests hold the trained runs
  fixed: they say whether *these* runs differ, not whether the method would again with another seed.
  - *Paired bootstrap*: problems resampled with replacement (a problem carries all its seeds); {pct}% percentile CI;
    two-sided p = min(1, 2 · (1 + number of Δ* on the other side of 0) / (B + 1)).
  - *Exact McNemar*: b = pairs only A got right, c = pairs only B got right,
    p = min(1, 2 · Σ_{{i ≤ min(b,c)}} C(b+c, i) / 2^(b+c)); it treats the pooled pairs as independent.
- **Accuracy intervals (Table 1)**: percentile bootstrap over seeds and problems: seeds and problems are both resampled
  with replacement (a problem keeps all its seeds), statistic = mean over the drawn seeds of the category-weighted
  accuracy; it stays inside [0, 1]. The step-0 base resamples its step-0 answers the same way.
"""


def statistics(b: Built) -> list[str]:
    sig = b.config.significance
    return [STATS_TEXT.format(pct=b.pct, sig=sig, one=round(100 * (1 - sig)), draws=b.config.power_draws), ""]
