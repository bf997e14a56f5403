"""α sweeps as users run them: the CLI, real tiny training, a real Optuna sqlite storage and MLflow store.

The 4-trial study is killed (SIGKILL) in the middle of its third trial, resumed by re-running the same command,
and its best α per edge, where its trials separate beyond their noise, is composed into a later run's config.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

optuna = pytest.importorskip("optuna")

import mlflow  # noqa: E402
import yaml  # noqa: E402

from hacrl_exp.config.cli import config_dirs_of, overrides_of  # noqa: E402
from hacrl_exp.evaluation.separation import separate_best  # noqa: E402
from hacrl_exp.trainer.validate import preflight  # noqa: E402
from tests.cli import run_cli  # noqa: E402
from tests.e2e.tiny import tiny_overrides  # noqa: E402

EDGES = {"opt_char<-gpt2_bpe": ("opt_char", "gpt2_bpe"), "gpt2_bpe<-opt_char": ("gpt2_bpe", "opt_char")}


def sweep_arguments(folder, study: str, *extra: str) -> list[str]:
    """`python -m hacrl_exp.run`'s arguments for a tiny α sweep."""
    tiny = tiny_overrides("pair", steps=2)  # evaluations at steps 0, 1 (reported to the studies) and 2 (the value)
    return [
        *("-m", "+hparams_search=alpha_pair", *tiny, "trainer.eval_every=1", "trainer.save_final_models=false"),
        *(f"hydra.sweep.dir={folder}", f"hydra.sweeper.study_name={study}", *extra),
    ]


def edge_trials(folder, study: str) -> dict[str, list]:
    storage = f"sqlite:///{folder / 'optuna.db'}"
    return {e: optuna.load_study(study_name=f"{study}/{e}", storage=storage).get_trials() for e in EDGES}


def states(trials) -> list[str]:
    return [t.state.name for t in trials]


def test_study_is_killed_resumes_and_its_best_alpha_is_included(tmp_path):
    arguments = sweep_arguments(tmp_path, "pair4", "hydra.sweeper.n_trials=4")
    started = time.monotonic()
    with open(tmp_path / "first.log", "w") as log:  # a real process, to kill
        command = [sys.executable, "-m", "hacrl_exp.run", *arguments]
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        while not (tmp_path / "trial_2" / "config.json").exists():  # the third trial has started training
            assert process.poll() is None and time.monotonic() - started < 300, (tmp_path / "first.log").read_text()
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    killed = edge_trials(tmp_path, "pair4")
    assert all(states(t) == ["COMPLETE", "COMPLETE", "RUNNING"] for t in killed.values()), killed

    resumed = run_cli("hacrl_exp.run", arguments)  # the same command resumes (in this process)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    trials = edge_trials(tmp_path, "pair4")
    for edge, (learner, _) in EDGES.items():
        assert states(trials[edge]) == ["COMPLETE", "COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]
        assert trials[edge][2].user_attrs["interrupted"] is True
        assert trials[edge][3].params == trials[edge][2].params  # the killed trial's α is retried
        for trial in (t for t in trials[edge] if t.state.name == "COMPLETE"):
            assert set(trial.intermediate_values) == {1}  # reported during training, then the final value
            summary = json.loads((tmp_path / f"trial_{trial.number}" / "summary.json").read_text())
            assert trial.value == summary["evals"]["2"][learner]["accuracy/mean"]
    for number in (0, 1, 3, 4):  # α[k←j] and α[j←k] are tuned separately
        assert trials["opt_char<-gpt2_bpe"][number].params != trials["gpt2_bpe<-opt_char"][number].params
    assert "marked FAIL" in resumed.stdout + resumed.stderr and "best α per edge" in resumed.stdout

    client = mlflow.MlflowClient()
    killed_runs = client.search_runs(
        [client.get_experiment_by_name("hacrl").experiment_id], "tags.study = 'pair4' and tags.trial = '2'"
    )
    assert killed_runs and {r.info.status for r in killed_runs} == {"KILLED"}  # parent + agents, not left RUNNING
    for number in (0, 1, 3, 4):
        run = client.get_run(trials["opt_char<-gpt2_bpe"][number].user_attrs["mlflow_run_id"])
        assert run.data.tags["study"] == "pair4" and run.data.tags["trial"] == str(number)
        for edge, (learner, source) in EDGES.items():
            alpha = trials[edge][number].params["alpha"]
            assert float(run.data.tags[f"alpha/{learner}_from_{source}"]) == pytest.approx(alpha, rel=1e-5)
            assert run.data.params[f"agents.members.{learner}.alpha_from.{source}"] == str(alpha)

    path = tmp_path / "best_alpha" / "pair4.yaml"  # written only when some edge's trials separate
    best = yaml.safe_load(path.read_text())["agents"] if path.exists() else {}
    later = ["--config-dir", str(tmp_path), "agents=pair", "+best_alpha=pair4"]  # as `python -m hacrl_exp.run` does
    composed = overrides_of(later) + config_dirs_of(later) if path.exists() else ["agents=pair"]
    members = preflight(composed).agents.members
    assert path.exists() != ("no best α on any edge: no best_alpha/pair4.yaml written" in resumed.stdout)
    for edge, (learner, source) in EDGES.items():  # an edge gets an α only when its trials separate (8 problems)
        complete = [t for t in trials[edge] if t.state.name == "COMPLETE"]
        assert {t.user_attrs["heldout_problems"] for t in complete} == {8}  # task.eval_per_tier=8, one tier
        found = separate_best([t.value for t in complete], 8)
        written = best.get("members", {}).get(learner, {}).get("alpha_from", {})
        if found.separated:
            alpha = complete[found.best].params["alpha"]
            assert written[source] == members[learner].alpha_from[source] == alpha
            assert f"{edge:<28} {alpha:>8.4g}" in resumed.stdout
        else:
            assert source not in written and source not in members[learner].alpha_from
            assert f"{edge:<28} {'none':>8}" in resumed.stdout and f"no best α: {found.reason()}" in resumed.stdout


def test_a_trial_every_edge_study_prunes_stops_early_and_is_pruned(tmp_path):
    prune_all = ("hydra.sweeper.pruner.name=threshold", "hydra.sweeper.pruner.lower=1.01")  # any accuracy < 1.01
    arguments = sweep_arguments(tmp_path, "pruned", "hydra.sweeper.n_trials=1", *prune_all, "tracking=none")
    result = run_cli("hacrl_exp.run", arguments)  # no MLflow: the test above has it
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "trial_0" / "summary.json").read_text())
    assert summary["stopped_early"] == 1 and summary["last_step"] == 1
    for edge, trials in edge_trials(tmp_path, "pruned").items():
        assert states(trials) == ["PRUNED"]
        learner = EDGES[edge][0]
        assert trials[0].value == trials[0].intermediate_values[1] == summary["evals"]["1"][learner]["accuracy/mean"]
    assert not (tmp_path / "best_alpha").exists()  # no COMPLETE trial, no best α yet
