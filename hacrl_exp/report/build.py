"""Build a report folder: load the runs, compute the tables, draw the plots, write Markdown + HTML, log to MLflow.

Layout of <output_root>/<name>/: report.md, report.html, plots/*.png, tables/*.csv (the numbers behind the tables).
The folder is written next to the old one and swapped in at the end, so a failed build never leaves half a report.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hacrl_exp.config.report_schema import ReportConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.report import plots, render, tables
from hacrl_exp.report.alpha import best_alpha, load_alpha_trials
from hacrl_exp.report.claims import hypothesis_rows
from hacrl_exp.report.load import ReportData, load, mlflow_filter
from hacrl_exp.tracking import default_uri

ABLATION_ORDER = [f"HACPO −{s}" for s in ("Adv", "ω", "ExpIS", "Stepwise", "Clip")]


@dataclass
class Report:
    folder: Path
    markdown: str
    comparisons: list[tables.Comparison]
    accuracy: pd.DataFrame
    cost: pd.DataFrame
    data: ReportData
    headline: str = ""
    """The headline table and sentence (also headline.md), to be quoted verbatim."""
    run_id: str | None = None
    """The MLflow run holding the report as artifacts (log_to_mlflow)."""


def report_name(config: ReportConfig) -> str:
    """The folder name: `name`, else the grid tag, else the single experiment, else 'report'."""
    if config.name:
        return config.name
    if config.tags.get("grid"):
        return config.tags["grid"]
    return config.experiments[0] if config.experiments and len(config.experiments) == 1 else "report"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def make_report(config: ReportConfig) -> Report:
    """Build <output_root>/<name>/ from the MLflow runs the config selects; see the module docstring."""
    from mlflow.tracking import MlflowClient

    uri = config.uri or default_uri()
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        raise ConfigError(
            f"uri={uri!r}: no MLflow store there; point uri (or MLFLOW_TRACKING_URI) at the store the runs logged to"
        )
    client = MlflowClient(uri)
    experiments = config.experiments or [e.name for e in client.search_experiments()]
    data = load(
        client, experiments, config.tags, config.filter, config.label_params,
        config.include_unfinished, config.include_trials,
    )  # fmt: skip
    name = report_name(config)
    target = Path(config.output_root) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
    try:
        report = _write(config, data, work, name)
        _swap(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    report.folder = target
    if config.log_to_mlflow:
        report.run_id = _log(client, config, data, target, name)
    return report


def _write(config: ReportConfig, data: ReportData, out: Path, name: str) -> Report:
    (out / "plots").mkdir()
    (out / "tables").mkdir()
    level, settings = config.level, {"level": config.level, "n_boot": config.bootstrap, "seed": config.seed}
    tests = {"significance": config.significance, "margin": config.equivalence_margin, **settings}
    final = tables.finals(data)
    data.runs["final_step"] = data.runs["run_id"].map(final.groupby("run_id")["step"].max())
    columns = tables.columns_of(data)
    methods = tables.methods_in(data)
    main = [m for m in methods if m in tables.MAIN_METHODS]
    accuracy = tables.accuracy_table(
        final, [tables.BASE, *methods], columns, level, data, n_boot=config.bootstrap, seed=config.seed
    )
    # family 1: every pair of the main methods present; family 2: HACPO against each ablation (Δ > 0: the
    # mechanism helps). Holm adjusts each family per column, over agents and pairs.
    found = tables.comparisons(data, final, tables.main_pairs(main), columns, family=tables.MAIN, **tests)
    ablations = tables.ablation_methods(data)
    ablation_found = tables.comparisons(
        data, final, [("HACPO", m) for _, m in ablations], columns, family=tables.ABLATION, **tests
    )
    cost = tables.cost_table(data, final)
    agents = sorted(data.runs["agent"].unique())
    tasks = sorted(data.runs["task"].unique())
    task = "the embedded arithmetic task" if tasks == ["arithmetic"] else f"task {', '.join(tasks)}"
    pct = round(100 * level)
    legend = render.legend(config.significance, config.equivalence_margin)

    head = render.headline_markdown(found, cost, level, task)
    (out / "headline.md").write_text(f"{head}\n\n{legend}\n")
    md = [f"# Report: {name}", "", "## Headline", "", head, "", legend, ""]
    md += ["## The paper's claims as hypotheses", ""]
    md += ["Each claim is \"A > B\" on the mean held-out accuracy, per agent. Verdict from the Holm-adjusted "
           "across-seed test: supported (A beat B), contradicted (A fell short of B), otherwise not established. "
           "Seeds needed: for 80% power of a two-sided paired t-test at α = 0.05 to detect the observed mean "
           "difference with the observed SD of the per-seed differences (— when either is 0 or unknown); the "
           "sign-flip test itself cannot reach p < 0.05 with fewer than 6 seeds (its smallest p is 2/2^n), and Holm "
           "asks for more.", ""]  # fmt: skip
    md += [render.hypotheses_markdown(found + ablation_found, methods, agents, level), ""]
    where = f"experiments {config.experiments}" if config.experiments else "all experiments"
    selection = f"{where}, filter `{mlflow_filter(config.tags, config.filter) or 'none'}`"
    md += ["## Selection", "", render.selection_markdown(data.runs, selection, data.skipped), ""]
    md += ["## Main comparisons (family 1)", "", render.findings_markdown(found, level) or "No pair to compare.", ""]
    md += ["## Table 1: final held-out accuracy", ""]
    md += [f"Mean over seeds (one value per seed: that run's last evaluation; the base: its step-0 evaluation), with "
           f"its {pct}% percentile bootstrap interval over seeds and problems (both resampled, so it stays inside "
           f"[0, 1]). † a row without per-problem answers in the store: the {pct}% t-interval across seeds, cut to "
           "[0, 1].", ""]  # fmt: skip
    shown = accuracy[accuracy["method"].isin([tables.BASE, *main])]
    md += [render.accuracy_markdown(shown, columns), "", render.base_note(), ""]
    plots.final_bars(shown, out / "plots" / "final_accuracy.png", level)
    md += ["![final accuracy](plots/final_accuracy.png)", ""]
    md += ["### Differences between the main methods", "", legend, "", render.delta_markdown(found, columns, level), ""]
    md += ["## Ablations: HACPO against HACPO with one mechanism off (family 2)", ""]
    if not ablations:
        md += ["No ablation runs (HACPO with one mechanism off) in this selection.", ""]
    else:
        md += [render.delta_markdown(ablation_found, columns, level), ""]
    for key, method in ablations:
        mine = [c for c in ablation_found if c.b == method]
        part = accuracy[accuracy["method"].isin(["HACPO", method])]
        md += [f"### {method} ({render.PAPER_REFS[key]})", "", render.accuracy_markdown(part, columns), ""]
        md += [render.findings_markdown(mine, level), ""]
    md += ["## Learning curves", ""]
    curve_sets = [("main", main, "main methods"), ("ablations", ["HACPO", *[m for _, m in ablations]],
                  "HACPO and its ablations")]  # fmt: skip
    for agent in agents:
        for label, chosen, title in curve_sets:
            if label == "ablations" and not ablations:
                continue
            path = out / "plots" / f"curves_{label}_{slug(agent)}.png"
            plots.learning_curves(data, agent, chosen, path, level, title)
            md += [f"![{agent} {title}: learning curves](plots/{path.name})", ""]
        path = plots.reward_curves(data, agent, methods, out / "plots" / f"reward_{slug(agent)}.png")
        md += [f"![{agent} training reward](plots/{path.name})", ""]
    md += ["Seconds are the job's training time (rollout, scoring and updates of all its agents; evaluations "
           "excluded), so they depend on the machine's load.", ""]  # fmt: skip
    md += ["## Mechanisms over training", ""]
    md += [f"Per agent: ω (the cross loss weight), P̂ (the capability estimate) and the share of cross rows inside "
           f"the window, at every step, mean over seeds with a shaded {pct}% bootstrap interval over seeds, for the "
           "methods that share rollouts. Read from the runs' metrics cross/omega, train/p_hat and "
           "cross/in_window_share.",
           ""]  # fmt: skip
    sharing = [m for m in methods if m not in ("GSPO", "GSPO×2", "GRPO")]
    for agent in agents:
        path, notes = plots.mechanism_curves(
            data, agent, sharing, out / "plots" / f"mechanisms_{slug(agent)}.png", level
        )
        if path is not None:
            md += [f"![{agent} mechanisms](plots/{path.name})", ""]
        md += [f"- {note}" for note in notes] + ([""] if notes else [])
    diagnostics = tables.diagnostics_table(data, sharing)
    diagnostics.to_csv(out / "tables" / "diagnostics.csv", index=False)
    md += ["Each diagnostic's mean over a run's training steps, then over seeds: ω, P̂, the baseline weight 1/ρ "
           "(cross/baseline_weight), the in-window share, the cross rows' mean effective weight and ratio "
           "(cross/weight_mean, cross/ratio_mean), and the cross rows run per step (docs/metrics.md). ω and 1/ρ are "
           "logged as computed, also by a method that does not apply them (Naive, HACPO −ω, HACPO −Adv).", "",
           render.diagnostics_markdown(diagnostics), ""]  # fmt: skip
    md += ["## Rollout cost", "", render.cost_markdown(cost), ""]
    plots.cost_curves(data, main, out / "plots" / "cost.png", level)
    md += ["![rollout cost: accuracy against rollouts](plots/cost.png)", ""]
    md += ["## α response", ""] + _alpha_section(config, out) + [""]
    stats = STATS_TEXT.format(
        pct=pct, sig=config.significance, alpha_ci=round(1 - level, 3), margin=config.equivalence_margin
    )
    md += ["## Statistics", "", stats, ""]
    markdown = "\n".join(md)
    (out / "report.md").write_text(markdown)
    (out / "report.html").write_text(render.to_html(markdown, f"Report: {name}"))
    accuracy_flat = accuracy.map(lambda v: v.mean if isinstance(v, tables.Interval) else v)
    accuracy_flat.to_csv(out / "tables" / "accuracy.csv", index=False)
    intervals_frame(accuracy, columns).to_csv(out / "tables" / "accuracy_intervals.csv", index=False)
    cost.to_csv(out / "tables" / "cost.csv", index=False)
    comparisons_frame(found + ablation_found).to_csv(out / "tables" / "comparisons.csv", index=False)
    hypotheses_frame(found + ablation_found, methods, agents).to_csv(out / "tables" / "hypotheses.csv", index=False)
    return Report(out, markdown, found + ablation_found, accuracy, cost, data, head)


def _alpha_section(config: ReportConfig, out: Path) -> list[str]:
    if not config.studies.storage:
        return ["No α studies given (studies.storage=<Optuna storage URL> adds them)."]
    trials = load_alpha_trials(config.studies.storage, config.studies.sweeps, config.studies.param)
    if trials.empty:
        return [f"No study with a {config.studies.param!r} parameter in {config.studies.storage}."]
    best = best_alpha(trials)
    trials.to_csv(out / "tables" / "alpha_trials.csv", index=False)
    plots.alpha_curves(trials, best, out / "plots" / "alpha_response.png")
    return [
        f"Objective of each trial against its α, one panel per directed edge (learner<-source), from "
        f"`{config.studies.storage}`.", "", render.alpha_markdown(best), "", "![α response](plots/alpha_response.png)",
    ]  # fmt: skip


def comparisons_frame(found: list[tables.Comparison]) -> pd.DataFrame:
    """The comparisons as a flat table (tables/comparisons.csv)."""
    return pd.DataFrame(
        [
            {"agent": c.agent, "a": c.a, "b": c.b, "column": c.column, "family": c.family, "delta": c.paired.delta,
             "ci_low": c.paired.low, "ci_high": c.paired.high, "p_bootstrap": c.paired.p_bootstrap,
             "p_mcnemar": c.paired.p_mcnemar, "a_only_right": c.paired.b, "b_only_right": c.paired.c,
             "seeds": c.seeds.n, "seed_delta_mean": c.seeds.mean, "seed_ci_low": c.seeds.low,
             "seed_ci_high": c.seeds.high, "seed_sd": c.sd, "per_seed": " ".join(f"{d:.6g}" for d in c.per_seed),
             "p_sign_flip": c.p_sign_flip, "p_holm": c.p_holm, "equivalence_margin": c.margin, "p_tost": c.p_tost,
             "seeds_ahead": c.seeds_won, "seeds_needed": c.seeds_needed, "verdict": c.verdict,
             "runs_verdict": c.runs_verdict}
            for c in found
        ]
    )  # fmt: skip


def intervals_frame(accuracy: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Table 1 as rows (agent, method, column, mean, low, high, seeds, interval kind): tables/accuracy_intervals.csv."""
    rows = []
    for _, r in accuracy.iterrows():
        for column in columns:
            iv = r[column]
            rows.append((r["agent"], r["method"], column, iv.mean, iv.low, iv.high, iv.n, r["interval"]))
    return pd.DataFrame(rows, columns=["agent", "method", "column", "mean", "low", "high", "seeds", "interval"])


def hypotheses_frame(found: list[tables.Comparison], methods: list[str], agents: list[str]) -> pd.DataFrame:
    """The hypotheses table as data (tables/hypotheses.csv)."""
    rows = []
    for h, agent, c, judged in hypothesis_rows(found, methods, agents):
        rows.append(
            {"hypothesis": h.key, "claim": h.claim, "agent": agent, "a": h.a, "b": h.b,
             "delta": c.seeds.mean if c else None, "seed_ci_low": c.seeds.low if c else None,
             "seed_ci_high": c.seeds.high if c else None, "p_holm": c.p_holm if c else None,
             "seeds_needed": c.seeds_needed if c else None, "verdict": judged}
        )  # fmt: skip
    return pd.DataFrame(rows)


STATS_TEXT = """\
- **Across seeds (the primary test)**: a method's accuracy is one value per seed (that run's final evaluation). A
  comparison pairs A and B by seed (same warm start, same held-out problems): d_s = A_s − B_s.
  - *Paired t-interval*: d̄ ± t(n−1) · s_d/√n, the {pct}% interval of the mean difference (s_d with divisor n − 1).
  - *Sign-flip p*: the exact permutation test, p = #{{ε ∈ {{±1}}^n : |Σ ε_s d_s| ≥ |Σ d_s|}} / 2^n over all 2^n sign
    assignments; valid for any n, but never below 2/2^n (0.25 with 3 seeds: three seeds cannot establish anything).
  - *Holm*: within each family (family 1: every pair of the main methods; family 2: HACPO against each ablation),
    separately per column, over agents and pairs: with p_(1) ≤ … ≤ p_(m), adjusted p_(i) = max_{{j ≤ i}}
    min(1, (m − j + 1) · p_(j)). Both raw and adjusted p are shown.
  - *TOST*: equivalence within ±{margin} (`equivalence_margin`): p = max of the two one-sided t-test p-values of
    H0: μ ≤ −{margin} and H0: μ ≥ +{margin} on the d_s (not adjusted; needs 2 seeds and s_d > 0).
  - *Verdict*: "beat" ▲ / "fell short of" ▼ when the Holm-adjusted sign-flip p < {sig} (Δ above / below 0);
    otherwise "matched" ≈ when the TOST p < {sig}; otherwise "not established" ○. A sentence says so whenever the
    t-interval excludes 0 but the adjusted p does not pass, or the per-problem test disagrees, in either direction.
  - *Seeds needed*: the smallest n with 80% power of a two-sided paired t-test at α = 0.05 (noncentral t) for the
    observed d̄ and s_d; "—" when either is 0.
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


def _swap(work: Path, target: Path) -> None:
    """Replace `target` by `work` (the old report is removed only once the new one is in place)."""
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    work.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _log(client, config: ReportConfig, data: ReportData, folder: Path, name: str) -> str:
    """A run tagged role=report, in the experiment most of the runs came from, holding the folder as artifacts."""
    experiment_id = data.runs["experiment_id"].mode().iat[0]
    tags = {"role": "report", "report": name, "selection": mlflow_filter(config.tags, config.filter) or "all"}
    run = client.create_run(experiment_id, run_name=f"report/{name}", tags=tags)
    try:
        client.log_param(run.info.run_id, "runs", str(len(data.runs)))
        client.log_artifacts(run.info.run_id, str(folder), "report")
    except BaseException:
        client.set_terminated(run.info.run_id, status="FAILED")
        raise
    client.set_terminated(run.info.run_id)
    return run.info.run_id
