"""A report built from real tiny training runs in a real MLflow store: files, numbers, statements, artifacts."""

import re
import subprocess
import sys

import pandas as pd
import pytest

from hacrl_exp.config.report_schema import validate_report
from hacrl_exp.errors import ConfigError
from hacrl_exp.report.stats import seed_verdict, sign_flip_p
from hacrl_exp.report.text import signed
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides

METHODS = {"gspo": "GSPO", "gspo_x2": "GSPO×2", "hacpo": "HACPO", "hacpo_no_omega": "HACPO −ω"}
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """6 + 2 tiny 2-step jobs (GSPO, GSPO×2, HACPO, HACPO −ω at seeds 0 and 1) tagged grid=report_test."""
    root = tmp_path_factory.mktemp("report_runs")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cache = tmp_path_factory.getbasetemp() / "warm_start_cache"  # the suite's shared warm-start cache
    for method in METHODS:
        for seed in SEEDS:
            overrides = tiny_overrides("pair", steps=2) + [
                f"+method={method}",
                f"seed={seed}",
                "task.eval_per_tier=24",
                "trainer.eval_limit=24",
                "trainer.eval_every=1",
                f"trainer.cache_dir={cache}",
                f"tracking.uri={uri}",
                "tracking.experiment=report_test",
                "tracking.log_models=false",
                "+tracking.tags.grid=report_test",
            ]
            train(preflight(overrides), root / f"{method}_{seed}")
    evaluate_benchmark(root, uri)
    return root, uri


def evaluate_benchmark(root, uri):
    """`python -m hacrl_exp.evaluate`'s job on the final HACPO and GSPO×2 checkpoints: benchmark `arithmetic`."""
    from hacrl_exp.config.evaluate_schema import validate_evaluate
    from hacrl_exp.evaluation.inputs import check_inputs
    from hacrl_exp.evaluation.pipeline import run_evaluation

    folders = [str(root / f"{m}_{s}") for m in ("hacpo", "gspo_x2") for s in SEEDS]
    settings = {"checkpoints": folders, "benchmarks": ["arithmetic"], "limit": 24, "bootstrap": 0, "threads": 1}
    config = validate_evaluate({**settings, "grader": {"workers": 1}, "tracking": {"uri": uri}})
    check_inputs(config)
    run_evaluation(config, root / "eval")


@pytest.fixture(scope="module")
def report(store, tmp_path_factory):
    from hacrl_exp.report.build import make_report

    root, uri = store
    storage = f"sqlite:///{root / 'optuna.db'}"
    make_alpha_studies(storage)
    out = tmp_path_factory.mktemp("reports")
    config = {"uri": uri, "tags": {"grid": "report_test"}, "output_root": str(out), "bootstrap": 500}
    return make_report(validate_report({**config, "studies": {"storage": storage}})), uri, storage


def make_alpha_studies(storage):
    """Two real edge studies as the α sweeper names them, α ∈ {0, 1, 2, 3}, objective 0.5 − 0.1·|α − best|."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = {"alpha": optuna.distributions.FloatDistribution(0.0, 4.0)}
    for learner, source, best in (("opt_char", "gpt2_bpe", 2.0), ("gpt2_bpe", "opt_char", 1.0)):
        study = optuna.create_study(study_name=f"alpha_test/{learner}<-{source}", storage=storage, direction="maximize")
        for key, value in {"learner": learner, "source": source, "metric": "accuracy/mean"}.items():
            study.set_user_attr(key, value)
        for alpha in (0.0, 1.0, 2.0, 3.0):
            study.enqueue_trial({"alpha": alpha})
            trial = study.ask(space)
            study.tell(trial, 0.5 - 0.1 * abs(trial.params["alpha"] - best))


def final_from_mlflow(uri):
    """{(agent, method label, seed): final eval/accuracy/mean} straight from the MLflow store."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("report_test")
    out = {}
    for run in client.search_runs([experiment.experiment_id], "tags.role = 'agent'"):
        parent = client.get_run(run.data.tags["mlflow.parentRunId"])
        params = parent.data.params
        method = {"gspo": "GSPO", "gspo_x2": "GSPO×2"}.get(params["algorithm.name"], "HACPO")
        method += " −ω" if params["algorithm.name"] == "hacpo" and params["mechanisms.omega"] == "False" else ""
        history = client.get_metric_history(run.info.run_id, "eval/accuracy/mean")
        out[(run.data.tags["agent"], method, int(parent.data.tags["seed"]))] = max(history, key=lambda m: m.step).value
    return out


def test_report_files_exist(report):
    built, _, _ = report
    folder = built.folder
    assert (folder / "report.md").read_text() == built.markdown
    html = (folder / "report.html").read_text()
    assert html.startswith("<!doctype html>") and "<table>" in html and 'src="plots/final_accuracy.png"' in html
    pngs = sorted(p.name for p in (folder / "plots").glob("*.png"))
    for agent in ("opt_char", "gpt2_bpe"):
        expected = {f"curves_main_{agent}.png", f"curves_ablations_{agent}.png", f"reward_{agent}.png"}
        assert expected | {f"mechanisms_{agent}.png"} <= set(pngs)  # the trainer logs ω, P̂ and the window share
    assert {"final_accuracy.png", "forest.png", "cost.png", "alpha_response.png"} <= set(pngs)
    assert (folder / "headline.md").read_text().startswith(built.headline)
    for png in (folder / "plots").glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000, png
        assert f"plots/{png.name}" in built.markdown  # every plot is shown in the report
    tables = {p.name for p in (folder / "tables").iterdir()}
    assert {"accuracy.csv", "accuracy_intervals.csv", "cost.csv", "comparisons.csv", "hypotheses.csv"} <= tables
    assert {"per_seed_accuracy.csv", "outlying_seeds.csv", "starts.csv", "diagnostics.csv"} <= tables
    assert "alpha_trials.csv" in tables


def test_table_numbers_match_mlflow(report):
    built, uri, _ = report
    finals = final_from_mlflow(uri)
    assert len(finals) == 2 * len(METHODS) * len(SEEDS)
    table = built.accuracy.set_index(["agent", "method"])
    for agent in ("opt_char", "gpt2_bpe"):
        for method in METHODS.values():
            values = [finals[(agent, method, seed)] for seed in SEEDS]
            cell = table.loc[(agent, method), "mean"]
            assert cell.mean == pytest.approx(sum(values) / len(values), abs=1e-12)
            assert cell.n == len(SEEDS) and 0.0 <= cell.low <= cell.mean <= cell.high <= 1.0
            row = next(line for line in built.markdown.splitlines() if line.startswith(f"| {agent} | {method} | 2 |"))
            shown = (
                f"{cell.mean:.3f}" if cell.low == cell.high else f"{cell.mean:.3f} [{cell.low:.3f}, {cell.high:.3f}]"
            )
            assert f"| {shown} |" in row  # tiny runs can score 0 everywhere: no spread, the mean alone


def test_base_row_interval_is_the_bootstrap_of_the_step_0_answers(report):
    """The base row resamples the step-0 answers (one run per agent and seed): a bootstrap interval in [0, 1]."""
    from mlflow.tracking import MlflowClient

    from hacrl_exp.report.tables import BASE

    built, uri, _ = report
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("report_test")
    table = built.accuracy.set_index(["agent", "method"])
    for agent in ("opt_char", "gpt2_bpe"):
        row = table.loc[(agent, BASE)]
        assert row["interval"] == "bootstrap"
        cell = row["mean"]
        assert 0.0 <= cell.low <= cell.mean <= cell.high <= 1.0
        starts = {}
        for run in client.search_runs([experiment.experiment_id], f"tags.role = 'agent' and tags.agent = '{agent}'"):
            parent = client.get_run(run.data.tags["mlflow.parentRunId"])
            history = client.get_metric_history(run.info.run_id, "eval/accuracy/mean")
            starts.setdefault(int(parent.data.tags["seed"]), set()).add(min(history, key=lambda m: m.step).value)
        assert all(len(values) == 1 for values in starts.values())  # every method starts from the same warm start
        assert cell.mean == pytest.approx(sum(v.pop() for v in starts.values()) / len(starts), abs=1e-12)
        assert not any(line.startswith(f"| {agent} | {BASE} †") for line in built.markdown.splitlines())


def test_paired_delta_equals_difference_of_logged_accuracies(report):
    built, uri, _ = report
    finals = final_from_mlflow(uri)
    mean_rows = [c for c in built.comparisons if c.column == "mean"]
    assert {(c.a, c.b) for c in mean_rows} == {("HACPO", "GSPO"), ("HACPO", "GSPO×2"), ("GSPO×2", "GSPO"),
                                               ("HACPO", "HACPO −ω")}  # fmt: skip
    for c in mean_rows:
        per_seed = [finals[(c.agent, c.a, s)] - finals[(c.agent, c.b, s)] for s in SEEDS]
        assert c.paired.delta == pytest.approx(sum(per_seed) / len(per_seed), abs=1e-9)
        assert c.seeds.mean == pytest.approx(c.paired.delta, abs=1e-9)
        assert c.paired.pairs == 24 * len(SEEDS) and c.paired.problems == 24
        assert c.paired.low <= c.paired.delta <= c.paired.high
        assert c.per_seed == pytest.approx(per_seed) and c.p_sign_flip == pytest.approx(sign_flip_p(per_seed))


def test_statements_match_the_numbers(report):
    built, _, _ = report
    for c in (c for c in built.comparisons if c.column == "mean"):
        expected = seed_verdict(c.seeds.mean, c.p_holm, c.p_tost_holm, c.p_refute_holm, 0.05)
        assert c.verdict == expected
        assert expected not in ("beat", "fell short of")  # 2 seeds: no sign-flip p below 2/2² = 0.5
        line = next(x for x in built.markdown.splitlines() if x.startswith("- ") and f"{c.a} " in x and
                    f" {c.b} for {c.agent}" in x)  # fmt: skip
        assert f"Δ = {signed(c.seeds.mean)} in held-out accuracy" in line and expected in line
        assert "With 2 seeds no sign-flip p can be below 0.500" in line
    head = built.markdown.split("## Headline", 1)[1].split("\n## ", 1)[0]
    assert built.headline[built.headline.index("| agent | A vs B |") :] in head
    for c in (c for c in built.comparisons if (c.a, c.column) == ("HACPO", "mean") and c.family == "claims"):
        row = f"| {c.agent} | HACPO vs {c.b} |"
        assert row in head and f"{signed(c.seeds.mean)}" in next(x for x in head.splitlines() if x.startswith(row))


def test_rollout_cost_table(report):
    """Generated rollouts from MLflow; the other costs are the runs' cost/* totals, or 'not logged by these runs'
    for a store whose runs did not log them."""
    from mlflow.tracking import MlflowClient

    from hacrl_exp.report.costs import COSTS, not_logged
    from hacrl_exp.report.load import TOTALS

    built, uri, _ = report
    cost = built.cost.set_index(["agent", "method"])
    for agent in ("opt_char", "gpt2_bpe"):
        assert cost.loc[(agent, "GSPO×2"), "generated rollouts"] == 2 * 4 * 8  # 2 steps × 4 prompts × G 8
        assert cost.loc[(agent, "HACPO"), "generated rollouts"] == 2 * 4 * 4
        assert cost.loc[(agent, "HACPO"), "wall-clock s (job)"] > 0
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("report_test").experiment_id], "tags.role = 'agent'")
    for name in COSTS:
        logged = [r for r in runs if any(k in r.data.metrics for k in TOTALS[name])]
        if not logged:
            assert name in not_logged(built.cost) and "Not logged by these runs: " in built.markdown
        else:
            assert len(logged) == len(runs) and cost[name].notna().all(), name


def test_seed_tags_and_grading_policy_are_read_from_the_runs(report):
    """The regime says what the jobs' tags and params say: data and held-out seeds varied, fixed, or not recorded;
    the grading policy (param task.grader_forms; absent: requested for a math job, the policy before the setting;
    none for a job whose grader reads no answer form)."""
    from mlflow.tracking import MlflowClient

    from hacrl_exp.report.seeds import varied

    built, uri, _ = report
    client = MlflowClient(uri)
    parents = client.search_runs([client.get_experiment_by_name("report_test").experiment_id], "tags.role = 'parent'")
    for tag, what in (("data_seed", "Data seed (the prompt order)"), ("heldout_seed", "Held-out seed")):
        values = pd.Series([p.data.tags.get(tag) for p in parents], dtype=object)
        assert f"{what}" in built.markdown and varied(values, len(parents)) in built.markdown
    # a math job without the param ran under `requested` (before the setting); a job that reads no form logs none
    default = {"math": "requested"}
    forms = {p.data.params.get("task.grader_forms", default.get(p.data.params["task.name"], "none")) for p in parents}
    assert len(forms) == 1 and f"Grading: `task.grader_forms={forms.pop()}`" in built.markdown


def test_alpha_section_reads_the_studies(report):
    built, _, _ = report
    trials = (built.folder / "tables" / "alpha_trials.csv").read_text()
    assert trials.count("alpha_test/opt_char<-gpt2_bpe") == 4
    for edge, best in (("opt_char<-gpt2_bpe", 2.0), ("gpt2_bpe<-opt_char", 1.0)):
        learner, source = edge.split("<-")
        row = rf"\| alpha_test/{edge} \| {learner} \| {source} \| ([0-9.]+) \| ([0-9.]+) \| 4 \|"
        found = re.search(row, built.markdown)
        assert found and float(found.group(1)) == best and float(found.group(2)) == pytest.approx(0.5)


def test_report_is_logged_to_mlflow(report):
    from mlflow.tracking import MlflowClient

    built, uri, _ = report
    client = MlflowClient(uri)
    run = client.get_run(built.run_id)
    assert run.data.tags["role"] == "report" and run.info.status == "FINISHED"
    logged = {a.path for a in client.list_artifacts(built.run_id, "report")}
    assert {"report/report.md", "report/report.html", "report/plots", "report/tables"} <= logged
    plots = {a.path for a in client.list_artifacts(built.run_id, "report/plots")}
    assert "report/plots/final_accuracy.png" in plots


def test_cli_bad_key_is_one_line_exit_2(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "hacrl_exp.report", "nmae=x", f"output_root={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "nmae is not a report config key" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_selection_without_runs_names_the_filter(report, tmp_path):
    from hacrl_exp.report.build import make_report

    _, uri, _ = report
    config = validate_report({"uri": uri, "tags": {"grid": "no_such_grid"}, "output_root": str(tmp_path)})
    with pytest.raises(ConfigError, match="no training runs .* match tags {'grid': 'no_such_grid'}"):
        make_report(config)
    assert not list(tmp_path.iterdir())  # nothing written


def test_benchmark_column_from_evaluation_runs(report):
    from mlflow.tracking import MlflowClient

    built, uri, _ = report
    client = MlflowClient(uri)
    logged = {}  # (agent, seed of its training job, method) -> arithmetic/accuracy of the evaluation run
    for run in client.search_runs([client.get_experiment_by_name("report_test").experiment_id], "tags.role = 'eval'"):
        training = client.get_run(run.data.tags["training_run_id"])
        method = {"hacpo": "HACPO", "gspo_x2": "GSPO×2"}[training.data.params["algorithm.name"]]
        key = (run.data.tags["agent"], method, int(training.data.tags["seed"]))
        logged[key] = run.data.metrics["arithmetic/accuracy"]
    assert len(logged) == 2 * 2 * len(SEEDS)
    table = built.accuracy.set_index(["agent", "method"])
    for (agent, method), cell in table["arithmetic"].items():
        values = [v for (a, m, _), v in logged.items() if (a, m) == (agent, method)]
        if values:  # HACPO and GSPO×2 were evaluated at both seeds
            assert cell.n == 2 and cell.mean == pytest.approx(sum(values) / 2)
        else:
            table1 = built.markdown.split("## Table 1", 1)[1]
            row = next(x for x in table1.splitlines() if x.startswith(f"| {agent} | {method}"))
            assert cell.n == 0 and row.split("|")[-2].strip() == ""  # the arithmetic cell (last) is empty, not 0
    found = [c for c in built.comparisons if (c.a, c.b, c.column) == ("HACPO", "GSPO×2", "arithmetic")]
    assert len(found) == 2
    for c in found:
        per_seed = [logged[(c.agent, "HACPO", s)] - logged[(c.agent, "GSPO×2", s)] for s in SEEDS]
        assert c.paired.delta == pytest.approx(sum(per_seed) / 2) and c.paired.pairs == 24 * len(SEEDS)
    assert "| Δ arithmetic |" in built.markdown


def test_comparisons_csv_round_trips(report):
    built, _, _ = report
    rows = (built.folder / "tables" / "comparisons.csv").read_text().splitlines()
    assert rows[0].startswith("agent,a,b,column,family,delta") and len(rows) == 1 + len(built.comparisons)
    assert ",p_sign_flip,p_holm,tests_in_family,equivalence_margin,margin_reason,p_tost,p_tost_holm," in rows[0]
    assert ",upper_bound,p_refute,p_refute_holm,seeds_ahead,seeds_tied,seeds_behind,power," in rows[0]


def test_a_seed_run_twice_is_refused_by_name(report, tmp_path):
    """A copy of the store where HACPO's seed-1 job says seed 0: two finished jobs of (HACPO, seed 0) would count as
    one seed twice, so the report refuses and names both jobs; the store itself is untouched."""
    import shutil

    from mlflow.tracking import MlflowClient

    from hacrl_exp.report.build import make_report

    _, uri, _ = report
    shutil.copy(uri.removeprefix("sqlite:///"), tmp_path / "mlflow.db")
    copy = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(copy)
    experiment = client.get_experiment_by_name("report_test").experiment_id
    parents = {
        int(r.data.tags["seed"]): r.info.run_id
        for r in client.search_runs([experiment], "tags.role = 'parent' and params.`algorithm.name` = 'hacpo'")
        if r.data.params["mechanisms.omega"] == "True"
    }
    client.set_tag(parents[1], "seed", "0")
    config = validate_report({"uri": copy, "tags": {"grid": "report_test"}, "output_root": str(tmp_path / "out")})
    jobs = ", ".join(sorted(parents.values()))
    with pytest.raises(ConfigError, match=rf"^2 \(method, agent, seed\) .* HACPO seed 0 \(\w+\) in jobs {jobs};"):
        make_report(config)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_the_selection_names_the_code_versions(report):
    import pandas as pd

    from hacrl_exp.report.render import code_versions

    built, uri, _ = report
    assert re.search(r"Code: git commit `(\w+|unknown)` \(8 jobs\)", built.markdown)
    assert "<details><summary>8 jobs</summary>" in built.markdown  # every job, with its run id and how to open it
    opening = f"python -m hacrl_exp.ui --store {uri} (or mlflow ui --backend-store-uri {uri} --host 127.0.0.1)"
    assert f"To open a job's run: {opening}" in built.markdown
    for parent in built.data.runs["parent_id"].unique():
        assert f"`{parent}` |" in built.markdown
    jobs = pd.DataFrame({"parent_id": ["a", "a", "b", "c"], "commit": ["1035eeb", "1035eeb", "1035eeb", "85bf782"],
                         "dirty": [False, False, False, True]})  # fmt: skip
    assert code_versions(jobs) == (
        "Code: git commit `1035eeb` (2 jobs), `85bf782` (1 job). **2 code versions**: compare methods run from one "
        "commit, or check the diff; **1 job ran with uncommitted changes**."
    )
    assert code_versions(jobs.iloc[:3]) == "Code: git commit `1035eeb` (2 jobs)."


def test_diagnostics_are_the_logged_means_over_steps_then_seeds(report):
    """tables/diagnostics.csv against the MLflow metric histories: ω and the cross rows per step of HACPO and
    HACPO −ω, per agent, are the mean over steps ≥ 1 of each run, then over seeds; GSPO (no sharing) has no row."""
    import pandas as pd
    from mlflow.tracking import MlflowClient

    built, uri, _ = report
    table = pd.read_csv(built.folder / "tables" / "diagnostics.csv").set_index(["agent", "method"])
    assert set(table.index.get_level_values("method")) == {"HACPO", "HACPO −ω"}
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("report_test").experiment_id
    expected = {}  # (agent, method, column) -> per-seed means
    for run in client.search_runs([experiment], "tags.role = 'agent'"):
        params = client.get_run(run.data.tags["mlflow.parentRunId"]).data.params
        if params["algorithm.name"] != "hacpo":
            continue
        method = "HACPO" if params["mechanisms.omega"] == "True" else "HACPO −ω"
        for column, key in (("ω", "cross/omega"), ("cross rows / step", "cross/rows_run")):
            values = [m.value for m in client.get_metric_history(run.info.run_id, key) if m.step > 0]
            expected.setdefault((run.data.tags["agent"], method, column), []).append(sum(values) / len(values))
    assert len(expected) == 2 * 2 * 2 and all(len(v) == len(SEEDS) for v in expected.values())
    for (agent, method, column), per_seed in expected.items():
        assert table.loc[(agent, method), column] == pytest.approx(sum(per_seed) / len(per_seed), rel=1e-12)
    assert "| agent | method | ω | P̂ | 1/ρ | in-window share |" in built.markdown


def test_the_selection_says_when_the_jobs_ran_and_what_they_cost(report):
    import pandas as pd

    from hacrl_exp.report.render import wall_clock

    built, _, _ = report
    assert re.search(r"Wall-clock: 8 jobs, \d{4}-\d\d-\d\d \d\d:\d\d–\d\d:\d\d UTC \(\d+ min\): \d+ min with a job "
                     r"running; the jobs' own times sum to \d+\.\d\d h\.", built.markdown)  # fmt: skip
    t = pd.Timestamp("2026-12-03 14:00", tz="UTC")
    minutes = pd.Timedelta(minutes=1)
    starts, ends = [0, 0, 10, 120], [20, 20, 30, 165]
    jobs = pd.DataFrame({"parent_id": ["a", "a", "b", "c"], "job_start": [t + m * minutes for m in starts],
                         "job_end": [t + m * minutes for m in ends]})  # fmt: skip
    # a grid run in two parts: the pause (30 to 120 min) is no job's time; a job's agent runs repeat its parent's row
    assert wall_clock(jobs) == (
        "Wall-clock: 3 jobs, in 2 parts, 2026-12-03 14:00–14:30 UTC (2 jobs, 30 min), 2026-12-03 16:00–16:45 UTC "
        "(1 job, 45 min): 75 min with a job running; the jobs' own times sum to 1.42 h."
    )
    assert wall_clock(jobs.iloc[:3]) == (
        "Wall-clock: 2 jobs, 2026-12-03 14:00–14:30 UTC (30 min): 30 min with a job running; the jobs' own times "
        "sum to 0.67 h."
    )
