"""The report's first screen, costs, links and figures on hand-made runs (tests/report/synthetic.py): no MLflow."""

import math
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from hacrl_exp.config.report_schema import validate_report
from hacrl_exp.report import plots
from tests.report.conftest import SETTINGS, capture
from tests.report.synthetic import make_data

REPO = Path(__file__).resolve().parents[2]


def test_the_report_opens_with_its_bottom_line_then_claims_contents_regime_and_headline(built):
    md = built.markdown
    assert md.startswith("# Report: synthetic\n\n## Bottom line\n\n- **strong.** HACPO ended highest, at 0.617 ")
    assert (
        md.index("## Bottom line")
        < md.index("## The claims at a glance\n")
        < md.index("![claims: HACPO against each baseline](plots/forest_claims.png)")
        < md.index("## Contents")
        < md.index("## Regime\n\n**Regime.** Agents strong, weak on task arithmetic (tiers ")
        < md.index("## Headline")
        < md.index("## Paired differences")
        < md.index("## The paper's claims")
    )
    assert "| strong | 0.300 | 0.300 0.300 0.300 | 0.310 0.310 0.310 |" in md  # start per seed, warm start reached
    assert "Data seed (the prompt order): varied across the jobs (3 values), equal to each job's seed. Held-out seed " \
           "(the held-out problems): fixed at 0 in every job." in md  # fmt: skip
    assert "Grading: `task.grader_forms=requested`: a correct value in a form the question did not ask for" in md
    head = (built.folder / "headline.md").read_text()
    assert head.startswith(built.headline) and head.startswith("**Regime.**")
    assert "Intervals are 95% t-intervals of the per-seed differences, not adjusted for multiplicity; p-values and " \
           "verdicts are Holm-adjusted over every test of their family (claims: 24 tests)" in head  # fmt: skip


def test_the_headline_gives_absolute_accuracies_and_what_each_comparison_held_equal(built):
    head = built.headline
    assert "| strong | HACPO vs GSPO×2 | 0.617 | 0.533 | +0.083 | [-0.204, +0.370] | 2 / 0 / 1 |" in head
    assert "| strong | HACPO vs Naive | 0.617 | 0.550 |" in head  # every HACPO comparison, Naive included
    sentence = next(x for x in head.splitlines() if x.startswith("- ○ **strong**: HACPO vs GSPO×2"))
    # GSPO×2 generates twice the rollouts per step; the same trained rows and updates (tests/report/synthetic.py)
    assert "Held equal: rows, updates, fwd tokens, bwd tokens; HACPO had 0.50× rollouts, 0.45× gen. tokens, 0.90× " \
           "process s of GSPO×2's." in sentence  # fmt: skip
    gspo = next(x for x in head.splitlines() if x.startswith("- ○ **strong**: HACPO vs GSPO:"))
    assert "Held equal: rollouts; HACPO had 0.90× gen. tokens, 2.00× rows, 2.00× updates" in gspo


def test_a_and_b_are_means_over_the_seeds_both_ran(tmp_path):
    """GSPO×2 lacks seed 2 (a killed job): HACPO's accuracy next to it is its mean over seeds 0 and 1, so A − B is
    the Δ beside them, not a mean over seeds GSPO×2 never ran."""
    from hacrl_exp.report.build import _compute
    from hacrl_exp.report.headline import headline_markdown
    from tests.report.synthetic import ACCURACY

    accuracy = {**ACCURACY, ("strong", "GSPO×2"): (0.50, 0.50)}
    b = _compute(validate_report(SETTINGS), make_data(accuracy), tmp_path)
    head = headline_markdown(b.found, b.cost, 0.95)
    # HACPO: 0.65, 0.65 at seeds 0-1 (0.617 over all three); GSPO×2 0.50, 0.50
    assert "| strong | HACPO vs GSPO×2 | 0.650 | 0.500 | +0.150 |" in head
    assert "| strong | HACPO vs GSPO | 0.617 | 0.500 | +0.117 |" in head  # both ran every seed: all three


def test_costs_not_logged_by_older_runs_are_said_so(tmp_path):
    from hacrl_exp.report.build import _compute
    from hacrl_exp.report.headline import headline_markdown
    from hacrl_exp.report.render import cost_markdown

    data = make_data(costs=False)
    b = _compute(validate_report(SETTINGS), data, tmp_path)
    costs = cost_markdown(b.cost)
    assert "Not logged by these runs: trained rows, updates, forward tokens, backward tokens, process s, job " \
           "process s." in costs  # fmt: skip
    row = next(x for x in costs.splitlines() if x.startswith("| strong | HACPO | 1280 | 11520 |"))
    assert row.count("not logged") == 6
    head = headline_markdown(b.found, b.cost, 0.95)
    sentence = next(x for x in head.splitlines() if x.startswith("- ○ **strong**: HACPO vs GSPO×2"))
    assert "HACPO had 0.50× rollouts, 0.45× gen. tokens of GSPO×2's; rows, updates, fwd tokens, bwd tokens, process " \
           "s, job process s not logged by these runs." in sentence  # fmt: skip
    _, figures = capture(lambda: plots.learning_curves(data, "strong", ["GSPO", "HACPO"], tmp_path / "c.png"))
    assert "wall-clock" in figures["c.png"].axes[2].get_xlabel()  # without process seconds: the job's wall-clock
    plots.plt.close(figures["c.png"])


def test_the_cost_table_holds_the_logged_totals(built):
    cost = built.cost.set_index(["agent", "method"])
    assert cost.loc[("strong", "HACPO"), "generated rollouts"] == 64 * 20
    assert cost.loc[("strong", "GSPO×2"), "trained rows"] == cost.loc[("strong", "HACPO"), "trained rows"] == 128 * 20
    assert cost.loc[("strong", "GSPO"), "updates"] == 2 * 20 and cost.loc[("strong", "HACPO"), "process s"] == 36.0
    row = "| strong | HACPO | 1280 | 11520 | 2560 | 80 | 30720 | 25600 | 36.0 | 72.0 | 20.0 | 0.617 |"
    assert row in built.markdown
    assert "Every cost was logged by every run." in built.markdown


def test_seed_roles_and_grading_policy_sentences():
    from hacrl_exp.report.seeds import grading_policy, seed_roles

    runs = make_data().runs
    unrecorded = runs.assign(data_seed=None, heldout_seed=None)
    assert seed_roles(unrecorded) == (
        "Data seed (the prompt order): not recorded by these runs. Held-out seed (the held-out problems): not "
        "recorded by these runs."
    )
    mixed = runs.assign(data_seed="0", heldout_seed=runs["seed"].astype(str).where(runs["seed"] > 0))
    assert seed_roles(mixed) == (
        "Data seed (the prompt order): fixed at 0 in every job. Held-out seed (the held-out problems): varied across "
        "the jobs (2 values) (recorded for 12 of 18 jobs)."
    )
    old = runs.assign(grader_forms_logged=False)
    assert "`task.grader_forms=requested` (these runs predate the setting: the policy they ran under)" in (
        grading_policy(old)
    )
    value = runs.assign(grader_forms=["value" if m == "HACPO" else "requested" for m in runs["method"]])
    assert grading_policy(value) == (
        "**2 grading policies**: requested (15 jobs), value (3 jobs); their accuracies are not comparable."
    )
    assert grading_policy(runs.assign(grader_forms="value")).startswith("Grading: `task.grader_forms=value`: a correct")


def test_a_start_near_the_ceiling_is_noted():
    from hacrl_exp.report.headline import regime_markdown

    runs = make_data().runs
    starts = pd.DataFrame({"agent": ["strong"] * 3 + ["weak"] * 3, "seed": [0, 1, 2] * 2,
                           "start": [0.97, 0.98, 0.99, 0.2, 0.3, 0.4], "warm start accuracy": math.nan,
                           "target": None})  # fmt: skip
    text = regime_markdown(runs, starts, {"strong": 400, "weak": 400}, ["GSPO", "HACPO"])
    assert "strong starts at 0.980 on average, within 0.05 of the ceiling: its comparisons have little room" in text
    no_target = "no target: a fixed step count (the start is where it landed)"
    assert "weak starts" not in text and f"| weak | 0.300 | 0.200 0.300 0.400 | {no_target} |" in text
    starts["target"] = "None"  # how MLflow's params hold an unset target
    assert f"| weak | 0.300 | 0.200 0.300 0.400 | {no_target} |" in regime_markdown(runs, starts, {"weak": 400}, [])
    starts["target"] = "0.2"  # a target, but a run that did not log where it stopped
    text = regime_markdown(runs, starts, {"weak": 400}, [])
    assert "| weak | 0.300 | 0.200 0.300 0.400 | not logged by these runs (target 0.2) |" in text


def test_jobs_link_to_their_mlflow_runs():
    from hacrl_exp.report.render import jobs_markdown, run_link

    runs = make_data().runs
    assert run_link("http://u:secret@mlflow.lab:5000/", "1", "abc") == "http://mlflow.lab:5000/#/experiments/1/runs/abc"
    served = jobs_markdown(runs, "https://mlflow.lab")
    assert "| GSPO-0 | GSPO | 0 | 0 | 0 | [p-GSPO-0](https://mlflow.lab/#/experiments/1/runs/p-GSPO-0) |" in served
    assert served.startswith("<details><summary>18 jobs</summary>") and "Each job links to its MLflow run." in served
    local = jobs_markdown(runs, "sqlite:///runs/mlflow.db")
    assert run_link("sqlite:///runs/mlflow.db", "1", "abc") is None
    assert "| GSPO-0 | GSPO | 0 | 0 | 0 | `p-GSPO-0` |" in local
    hint = (
        "To open a job's run: python -m hacrl_exp.ui --store sqlite:///runs/mlflow.db (or mlflow ui "
        "--backend-store-uri sqlite:///runs/mlflow.db --host 127.0.0.1), then http://127.0.0.1:5000/#/experiments/1/runs?"
    )
    assert hint in local
    assert "| data seed | held-out seed |" in local and "not recorded" in jobs_markdown(
        runs.assign(data_seed=None), None
    )


def test_forest_plot_has_one_row_per_comparison_and_agent(built, captured):
    ax = captured["forest.png"].axes[0]
    mean = [c for c in built.comparisons if c.column == "mean"]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(mean) and "strong: HACPO vs GSPO×2" in labels and "weak: HACPO vs HACPO −ω" in labels
    assert "![paired differences](plots/forest.png)" in built.markdown
    markers = {t.get_text() for t in ax.get_legend().get_texts()}
    # 3 seeds: an exact one-sided test cannot reach 5% (floor 1/8), so no "refuted" here (test_inference has one)
    assert {"not established", "δ hypothesised", "± margin"} <= markers


def test_mechanisms_are_small_multiples_with_omega_on_a_log_axis_where_applied(captured):
    fig = captured["mechanisms_strong.png"]
    titles = [ax.get_title() for ax in fig.axes[:3]]
    assert titles == ["Naive", "HACPO", "HACPO −ω"]  # one column per sharing method, in method order
    omega_row = fig.axes[:3]
    assert all(ax.get_yscale() == "log" for ax in omega_row)
    naive, hacpo, no_omega = omega_row
    assert not naive.get_lines() and not no_omega.get_lines()  # neither applies ω
    assert "ω not applied" in naive.texts[0].get_text()
    assert len(hacpo.get_lines()) == 3 + 1  # each seed, then the mean
    assert "not logged" in fig.axes[-1].texts[0].get_text()  # HACPO −ω logs no in-window share here


def test_a_method_has_one_colour_in_every_figure(captured):
    from matplotlib.colors import to_hex

    seen = {}  # method -> colours it was drawn in, over all figures
    for name, fig in captured.items():
        for ax in fig.axes:
            for line in ax.get_lines():
                if not line.get_label().startswith("_"):
                    seen.setdefault(line.get_label(), set()).add((name, to_hex(line.get_color())))
            for container in ax.containers:  # bars (final accuracy) and error bars (cost)
                label = container.get_label()
                if not label or label.startswith("_"):
                    continue
                colour = container.patches[0].get_facecolor() if hasattr(container, "patches") else (
                    container.lines[0].get_color())  # fmt: skip
                seen.setdefault(label, set()).add((name, to_hex(colour)))
    hacpo_figures = {figure for figure, _ in seen["HACPO"]}
    assert {"final_accuracy.png", "curves_main_strong.png", "curves_ablations_strong.png", "cost.png",
            "reward_strong.png"} <= hacpo_figures  # fmt: skip
    for method, drawn in seen.items():
        if method in plots.METHOD_COLOURS:
            assert {colour for _, colour in drawn} == {plots.colour_of(method)}, method
    assert plots.colour_of("GSPO (update-matched)") not in {plots.colour_of(m) for m in ("GSPO", "GSPO×2")}
    assert plots.colour_of("HACPO alpha=1") == plots.colour_of("HACPO alpha=1")  # unlisted labels: stable


def test_figure_titles_are_distinct(captured):
    titles = [fig._suptitle.get_text() if fig._suptitle else fig.axes[0].get_title() for fig in captured.values()]
    assert len(set(titles)) == len(titles), titles
    assert "main methods" in captured["curves_main_strong.png"]._suptitle.get_text()
    assert "HACPO and its ablations" in captured["curves_ablations_strong.png"]._suptitle.get_text()


def test_cost_plot_has_every_evaluation_and_error_bars(captured):
    ax = captured["cost.png"].axes[0]
    hacpo = next(c for c in ax.containers if c.get_label() == "HACPO")
    assert list(hacpo.lines[0].get_xdata()) == [0.0, 640.0, 1280.0]  # 64 rollouts per step at steps 0, 10, 20
    assert hacpo.has_yerr
    assert "process seconds" in captured["curves_main_strong.png"].axes[2].get_xlabel()


def test_mechanism_rows_skip_missing_keys_with_a_note(built, tmp_path):
    assert "- strong: in-window share of cross rows not logged by HACPO −ω" in built.markdown
    assert "![strong mechanisms](plots/mechanisms_strong.png)" in built.markdown
    data = make_data()
    data.curves = data.curves[~data.curves["metric"].str.startswith(("cross/", "train/p_hat"))]
    path, notes = plots.mechanism_curves(data, "strong", ["Naive", "HACPO"], tmp_path / "m.png", {"HACPO"})
    assert path is None and not (tmp_path / "m.png").exists()
    assert notes == ["strong: no run logged ω; that row is left out", "strong: no run logged P̂; that row is left out",
                     "strong: no run logged in-window share of cross rows; that row is left out"]  # fmt: skip


def test_reports_folder_ignored_but_published_reports_kept():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")

    def ignored(path):
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0

    assert ignored("reports/my_runs/report.md") and ignored("reports/report/plots/cost.png")
    assert not ignored("reports/paper_table1_tiny/report.md")
    assert not ignored("reports/paper_table1_tiny/plots/cost.png")


def test_signed_numbers_that_round_to_zero_have_no_minus():
    from hacrl_exp.report.text import signed

    assert signed(-1e-18) == "+0.000" and signed(-0.0004) == "+0.000"
    assert signed(-0.0006) == "-0.001" and signed(0.0416) == "+0.042" and signed(float("nan")) == "n/a"


def test_naive_cross_weight_is_the_one_its_objective_applies():
    """A Naive run that logged HACPO's would-be weight (runs before the resolution fix) reads as 1; HACPO's logged
    weight and ω pass through as the mean over steps ≥ 1, then over seeds."""
    from hacrl_exp.report.tables import diagnostics_table

    data = make_data()
    extra = [(r.run_id, step, "cross/weight_mean", 1.25 + 0.5 * r.seed)
             for r in data.runs.itertuples() if r.method in ("Naive", "HACPO") for step in (0, 10, 20)]  # fmt: skip
    data.curves = pd.concat([data.curves, pd.DataFrame(extra, columns=data.curves.columns)], ignore_index=True)
    table = diagnostics_table(data, ["Naive", "HACPO"]).set_index(["agent", "method"])
    assert table.loc[("strong", "Naive"), "cross weight"] == 1.0
    assert table.loc[("strong", "HACPO"), "cross weight"] == pytest.approx(1.25 + 0.5)  # seeds 0, 1, 2
    omega = [1.0 + 0.01 * seed + 0.001 * 15 for seed in (0, 1, 2)]  # steps 10 and 20
    assert table.loc[("weak", "HACPO"), "ω"] == pytest.approx(sum(omega) / 3)
    assert math.isnan(table.loc[("weak", "Naive"), "cross ratio"])  # never logged
