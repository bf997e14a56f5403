"""Build a report folder: load the runs, compute the tables, draw the plots, write Markdown + HTML, log to MLflow.

Layout of <output_root>/<name>/: report.md, report.html, plots/*.png, tables/*.csv (the numbers behind the tables).
The page opens on its bottom line and the claims block, then a table of contents, then the regime and the tables
(report/layout.py; the opening is computed from the same tables the CSV files hold, report/opening.py).
The folder is written next to the old one and swapped in at the end, so a failed build never leaves half a report;
only a folder a report made is replaced (report/folder.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hacrl_exp.config.report_schema import ReportConfig, report_name
from hacrl_exp.errors import ConfigError
from hacrl_exp.report import plots, render, sections, tables
from hacrl_exp.report.alpha import best_alpha, load_alpha_trials
from hacrl_exp.report.claims import hypothesis_rows
from hacrl_exp.report.compare import Comparison, comparisons, main_pairs
from hacrl_exp.report.costs import cost_table
from hacrl_exp.report.folder import check_target, write_folder
from hacrl_exp.report.headline import headline_markdown, regime_markdown
from hacrl_exp.report.layout import BOTTOM_LINE, CLAIMS_BLOCK, REGIME, page
from hacrl_exp.report.load import ReportData, load, mlflow_filter, store_uri
from hacrl_exp.report.opening import bottom_line, claims_block
from hacrl_exp.report.rules import ABLATIONS, MAIN_METHODS, Rules
from hacrl_exp.report.seeds import problems_per_agent, warm_starts


@dataclass
class Report:
    folder: Path
    markdown: str
    comparisons: list[Comparison]
    accuracy: pd.DataFrame
    cost: pd.DataFrame
    data: ReportData
    headline: str = ""
    """The regime and the headline (also headline.md), to be quoted verbatim."""
    run_id: str | None = None
    """The MLflow run holding the report as artifacts (log_to_mlflow)."""


def make_report(config: ReportConfig) -> Report:
    """Build <output_root>/<name>/ from the MLflow runs the config selects; see the module docstring."""
    from mlflow.tracking import MlflowClient

    target = check_target(config)  # before any run is read: python -m hacrl_exp.report checked it already
    uri = store_uri(config)  # parsed as run parses tracking.uri
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
    report = write_folder(target, lambda work: _write(config, data, work, name))
    report.folder = target
    if config.log_to_mlflow:
        report.run_id = _log(client, config, data, target, name)
    return report


def _rules(config: ReportConfig) -> Rules:
    return Rules(config.significance, config.equivalence_margin, config.margin_reason, config.hypothesised_effect,
                 config.effect_reason)  # fmt: skip


def _compute(config: ReportConfig, data: ReportData, out: Path) -> sections.Built:
    """Finals, Table 1, every comparison (the main pairs and HACPO vs each ablation, Holm per family) and the costs."""
    boot = {"level": config.level, "n_boot": config.bootstrap, "seed": config.seed}
    final = tables.finals(data)
    data.runs["final_step"] = data.runs["run_id"].map(final.groupby("run_id")["step"].max())
    columns, methods = tables.columns_of(data), tables.methods_in(data)
    main = [m for m in methods if m in MAIN_METHODS]
    accuracy = tables.accuracy_table(final, [tables.BASE, *methods], columns, config.level, data, config.bootstrap,
                                     config.seed)  # fmt: skip
    ablations = tables.ablation_methods(data)
    pairs = main_pairs(main, MAIN_METHODS) + [("HACPO", m) for _, m in ablations]
    found = comparisons(data, final, pairs, columns, _rules(config), config.power_draws, **boot)
    problems = problems_per_agent(data)
    cost = cost_table(data, final)
    return sections.Built(config, data, final, found, accuracy, cost, columns, methods, main, ablations, problems, out)


def _write(config: ReportConfig, data: ReportData, out: Path, name: str) -> Report:
    (out / "plots").mkdir()
    (out / "tables").mkdir()
    b = _compute(config, data, out)
    level, legend = config.level, render.legend(config.significance)
    regime = regime_markdown(data.runs, warm_starts(data, b.final), b.problems, b.methods)
    head = headline_markdown(b.found, b.cost, level)
    (out / "headline.md").write_text(f"{regime}\n\n{head}\n\n{legend}\n")
    where = f"experiments {config.experiments}" if config.experiments else "all experiments"
    selection = f"{where}, filter `{mlflow_filter(config.tags, config.filter) or 'none'}`"
    plots.cost_curves(data, b.main, out / "plots" / "cost.png", level)
    body = [
        (REGIME, [regime, ""]),
        ("Headline", [head, "", legend, ""]),
        ("Paired differences", sections.forest(b)),
        ("The paper's claims as hypotheses", [
            "Each claim is \"A > B\" on the mean held-out accuracy, per agent, with the gain δ it hypothesises (the "
            "Margins table gives each δ and its source). Verdict from the Holm-adjusted across-seed tests: "
            "contradicted (A fell short of B), supported (A beat B), refuted (the one-sided upper bound of Δ lies "
            "below δ), otherwise not established.", "",
            render.hypotheses_markdown(b.found, b.methods, b.agents, level), ""]),
        ("Costs", sections.costs(b)),
        ("Per seed", sections.per_seed(b)),
        ("Margins and hypothesised effects", [render.margins_markdown(b.found), ""]),
        ("Selection", [render.selection_markdown(data.runs, selection, data.skipped, data.uri), ""]),
        ("Comparisons", sections.comparisons_by_family(b)),
        ("Table 1: final held-out accuracy", _table1(b, legend)),
        ("Ablations: HACPO against HACPO with one mechanism off", sections.ablations(b)),
        ("Learning curves", sections.curves(b)),
        ("Mechanisms over training", sections.mechanisms(b)),
        ("Rollout cost", ["![rollout cost: accuracy against rollouts](plots/cost.png)", ""]),
        ("α response", [*_alpha_section(config, out), ""]),
        ("Statistics", sections.statistics(b)),
    ]  # fmt: skip
    frame = comparisons_frame(b.found)
    opening = [
        (BOTTOM_LINE, bottom_line(frame, accuracy_means(b.accuracy), b.cost)),
        (CLAIMS_BLOCK, claims_block(frame, out, level, config.significance)),
    ]
    markdown = page(f"Report: {name}", opening, body)
    (out / "report.md").write_text(markdown)
    (out / "report.html").write_text(render.to_html(markdown, f"Report: {name}"))
    _tables(b, frame)
    return Report(out, markdown, b.found, b.accuracy, b.cost, data, f"{regime}\n\n{head}")


def _table1(b: sections.Built, legend: str) -> list[str]:
    columns = b.columns
    md = [f"Mean over seeds (one value per seed: that run's last evaluation; the base: its step-0 evaluation), with "
           f"its {b.pct}% percentile bootstrap interval over seeds and problems (both resampled, so it stays inside "
           f"[0, 1]). † a row without per-problem answers in the store: the {b.pct}% t-interval across seeds, cut to "
           "[0, 1].", ""]  # fmt: skip
    shown = b.accuracy[b.accuracy["method"].isin([tables.BASE, *b.main])]
    md += [render.accuracy_markdown(shown, columns), "", render.base_note(), ""]
    plots.final_bars(shown, b.out / "plots" / "final_accuracy.png", b.config.level)
    md += ["![final accuracy](plots/final_accuracy.png)", ""]
    main = [c for c in b.found if c.family != ABLATIONS]
    md += ["### Differences between the main methods", "", legend, ""]
    return md + [render.delta_markdown(main, columns, b.config.level), ""]


def accuracy_means(accuracy: pd.DataFrame) -> pd.DataFrame:
    """Table 1 with each interval replaced by its mean (tables/accuracy.csv)."""
    return accuracy.map(lambda v: v.mean if isinstance(v, tables.Interval) else v)


def _tables(b: sections.Built, comparisons: pd.DataFrame) -> None:
    """The numbers behind the tables, as CSV files in tables/ (comparisons: `comparisons_frame(b.found)`)."""
    folder, columns = b.out / "tables", b.columns
    accuracy_means(b.accuracy).to_csv(folder / "accuracy.csv", index=False)
    intervals_frame(b.accuracy, columns).to_csv(folder / "accuracy_intervals.csv", index=False)
    b.cost.to_csv(folder / "cost.csv", index=False)
    comparisons.to_csv(folder / "comparisons.csv", index=False)
    hypotheses_frame(b.found, b.methods, b.agents).to_csv(folder / "hypotheses.csv", index=False)
    warm_starts(b.data, b.final).to_csv(folder / "starts.csv", index=False)


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


def comparisons_frame(found: list[Comparison]) -> pd.DataFrame:
    """The comparisons as a flat table (tables/comparisons.csv)."""
    rows = []
    for c in found:
        ahead, tied, behind = c.counts
        rows.append(
            {"agent": c.agent, "a": c.a, "b": c.b, "column": c.column, "family": c.family, "delta": c.paired.delta,
             "ci_low": c.paired.low, "ci_high": c.paired.high, "p_bootstrap": c.paired.p_bootstrap,
             "p_mcnemar": c.paired.p_mcnemar, "a_only_right": c.paired.b, "b_only_right": c.paired.c,
             "seeds": c.seeds.n, "seed_delta_mean": c.seeds.mean, "seed_ci_low": c.seeds.low,
             "seed_ci_high": c.seeds.high, "seed_sd": c.sd, "per_seed": " ".join(f"{d:.6g}" for d in c.per_seed),
             "p_sign_flip": c.p_sign_flip, "p_holm": c.p_holm, "tests_in_family": c.tests,
             "equivalence_margin": c.margin.value if c.margin else None,
             "margin_reason": c.margin.reason if c.margin else None, "p_tost": c.p_tost, "p_tost_holm": c.p_tost_holm,
             "hypothesised_effect": c.effect.value if c.effect else None,
             "effect_source": c.effect.reason if c.effect else None, "upper_bound": c.upper, "p_refute": c.p_refute,
             "p_refute_holm": c.p_refute_holm, "seeds_ahead": ahead, "seeds_tied": tied, "seeds_behind": behind,
             "power": c.power, "seeds_for_80_power": c.seeds_for_power, "minimum_detectable_effect": c.mde,
             "b_mean": c.means[1], "ceiling": c.ceiling, "verdict": c.verdict, "runs_verdict": c.runs_verdict}
        )  # fmt: skip
    return pd.DataFrame(rows)


def intervals_frame(accuracy: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Table 1 as rows (agent, method, column, mean, low, high, seeds, interval kind): tables/accuracy_intervals.csv."""
    rows = []
    for _, r in accuracy.iterrows():
        for column in columns:
            iv = r[column]
            rows.append((r["agent"], r["method"], column, iv.mean, iv.low, iv.high, iv.n, r["interval"]))
    return pd.DataFrame(rows, columns=["agent", "method", "column", "mean", "low", "high", "seeds", "interval"])


def hypotheses_frame(found: list[Comparison], methods: list[str], agents: list[str]) -> pd.DataFrame:
    """The hypotheses table as data (tables/hypotheses.csv)."""
    rows = []
    for h, agent, c, judged in hypothesis_rows(found, methods, agents):
        rows.append(
            {"hypothesis": h.key, "claim": h.claim, "agent": agent, "a": h.a, "b": h.b,
             "delta": c.seeds.mean if c else None, "seed_ci_low": c.seeds.low if c else None,
             "seed_ci_high": c.seeds.high if c else None, "p_holm": c.p_holm if c else None,
             "hypothesised_effect": c.effect.value if c and c.effect else None,
             "upper_bound": c.upper if c else None, "p_refute_holm": c.p_refute_holm if c else None,
             "power": c.power if c else None, "verdict": judged}
        )  # fmt: skip
    return pd.DataFrame(rows)


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
