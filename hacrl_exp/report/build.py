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
from hacrl_exp.report.load import ReportData, load, mlflow_filter
from hacrl_exp.report.text import headline
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
    final = tables.finals(data)
    data.runs["final_step"] = data.runs["run_id"].map(final.groupby("run_id")["step"].max())
    columns = tables.columns_of(data)
    methods = tables.methods_in(data)
    main = [m for m in methods if m in tables.MAIN_METHODS]
    accuracy = tables.accuracy_table(final, [tables.BASE, *methods], columns, level)
    # every main method against GSPO and GSPO×2; of the two baselines only GSPO×2 vs GSPO (does doubling help?)
    pairs = [(a, b) for a in main for b in tables.BASELINES if a != b and (a, b) != ("GSPO", "GSPO×2")]
    found = tables.comparisons(data, final, pairs, columns, significance=config.significance, **settings)
    ablations = tables.ablation_methods(data)
    ablation_found = tables.comparisons(
        data, final, [(m, "HACPO") for _, m in ablations], columns, significance=config.significance, **settings
    )
    cost = tables.cost_table(data, final)
    agents = sorted(data.runs["agent"].unique())
    tasks = sorted(data.runs["task"].unique())
    task = "the embedded arithmetic task" if tasks == ["arithmetic"] else f"task {', '.join(tasks)}"

    md = [f"# Report: {name}", ""]
    where = f"experiments {config.experiments}" if config.experiments else "all experiments"
    selection = f"{where}, filter `{mlflow_filter(config.tags, config.filter) or 'none'}`"
    md += ["## Selection", "", render.selection_markdown(data.runs, selection, data.skipped), ""]
    md += ["## What beat what", "", render.findings_markdown(found, level) or "No baseline to compare with.", ""]
    md += ["## Table 1: final held-out accuracy", ""]
    pct = round(100 * level)
    md += [f"Mean ± {pct}% t-interval across seeds (one value per seed: that run's last evaluation).", ""]
    md += [render.accuracy_markdown(accuracy[accuracy["method"].isin([tables.BASE, *main])], columns), ""]
    md += [render.base_note(), ""]
    plots.final_bars(accuracy[accuracy["method"].isin([tables.BASE, *main])], out / "plots" / "final_accuracy.png")
    md += ["![final accuracy](plots/final_accuracy.png)", ""]
    md += ["### Differences against GSPO and GSPO×2", "", render.delta_markdown(found, columns, level), ""]
    md += ["## Ablations: one mechanism switched off", ""]
    if not ablations:
        md += ["No ablation runs (HACPO with one mechanism off) in this selection.", ""]
    for key, method in ablations:
        mine = [c for c in ablation_found if c.a == method]
        part = accuracy[accuracy["method"].isin(["HACPO", method])]
        md += [f"### {method} ({render.PAPER_REFS[key]})", "", render.accuracy_markdown(part, columns), ""]
        md += [render.delta_markdown(mine, columns, level), "", render.findings_markdown(mine, level), ""]
    md += ["## Learning curves", ""]
    curve_sets = [("main", main), ("ablations", ["HACPO", *[m for _, m in ablations]])]
    for agent in agents:
        for label, chosen in curve_sets:
            if label == "ablations" and not ablations:
                continue
            path = out / "plots" / f"curves_{label}_{slug(agent)}.png"
            plots.learning_curves(data, agent, chosen, path, level)
            md += [f"![{agent} {label} learning curves](plots/{path.name})", ""]
        path = plots.reward_curves(data, agent, methods, out / "plots" / f"reward_{slug(agent)}.png")
        md += [f"![{agent} training reward](plots/{path.name})", ""]
    md += ["Seconds are the job's training time (rollout, scoring and updates of all its agents; evaluations "
           "excluded), so they depend on the machine's load.", ""]  # fmt: skip
    md += ["## Rollout cost", "", render.cost_markdown(cost), ""]
    plots.cost_scatter(cost, main, out / "plots" / "cost.png")
    md += ["![rollout cost](plots/cost.png)", ""]
    md += ["## α response", ""] + _alpha_section(config, out) + [""]
    stats = STATS_TEXT.format(pct=round(100 * level), sig=config.significance, alpha_ci=round(1 - level, 3))
    md += ["## Statistics", "", stats, ""]
    md += [headline(found, cost, level, task), ""]
    markdown = "\n".join(md)
    (out / "report.md").write_text(markdown)
    (out / "report.html").write_text(render.to_html(markdown, f"Report: {name}"))
    accuracy_flat = accuracy.map(lambda v: v.mean if isinstance(v, tables.Interval) else v)
    accuracy_flat.to_csv(out / "tables" / "accuracy.csv", index=False)
    cost.to_csv(out / "tables" / "cost.csv", index=False)
    comparisons_frame(found + ablation_found).to_csv(out / "tables" / "comparisons.csv", index=False)
    return Report(out, markdown, found + ablation_found, accuracy, cost, data)


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
            {"agent": c.agent, "a": c.a, "b": c.b, "column": c.column, "delta": c.paired.delta,
             "ci_low": c.paired.low, "ci_high": c.paired.high, "p_bootstrap": c.paired.p_bootstrap,
             "p_mcnemar": c.paired.p_mcnemar, "a_only_right": c.paired.b, "b_only_right": c.paired.c,
             "seeds": c.seeds.n, "seed_delta_mean": c.seeds.mean, "seed_ci_low": c.seeds.low,
             "seed_ci_high": c.seeds.high, "seeds_ahead": c.seeds_won, "verdict": c.verdict}
            for c in found
        ]
    )  # fmt: skip


STATS_TEXT = """\
- **Across seeds**: mean ± {pct}% Student-t interval, x̄ ± t(n−1) · s/√n over the seeds' final accuracies (s with
  divisor n − 1). The Δ "across seeds" is the same interval over per-seed differences (paired by seed).
- **Per problem**: a seed fixes the warm start, so at one seed every method starts from the same weights and answers
  the same held-out problems. Pairs are (seed, problem) with the two methods' final greedy answers, pooled over seeds.
  Δ weights each problem by 1/(size of its category), so it equals the difference of the accuracy means above.
- **Paired bootstrap**: problems are resampled with replacement (a problem carries all its seeds); the {pct}% CI is the
  percentile interval of the resampled Δ*, and the two-sided p = min(1, 2 · (1 + number of Δ* on the other side of 0)
  / (B + 1)) inverts that interval: the CI excludes 0 when p < {alpha_ci} (up to ties and the +1).
- **Exact McNemar**: b = pairs only A got right, c = pairs only B got right,
  p = min(1, 2 · Σ_{{i ≤ min(b,c)}} C(b+c, i) / 2^(b+c)); it treats the pooled pairs as independent.
- **Verdicts**: "beat" / "fell short of" when the paired-bootstrap p < {sig} (Δ above / below 0), otherwise
  "was indistinguishable from". Each sentence also gives the across-seed interval, which with few seeds is wide.
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
