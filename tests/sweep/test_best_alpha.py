"""An α study names a best α only when its trials separate beyond their noise: the rule on hand values, the sweep's
edge studies (real Optuna sqlite storage, the job summaries a trial reports) and the report's best-α table."""

import math

import pytest

optuna = pytest.importorskip("optuna")

from hacrl_exp.config.cli import config_dirs_of, overrides_of  # noqa: E402
from hacrl_exp.evaluation.separation import effective_problems, separate_best  # noqa: E402
from hacrl_exp.graph import graph_from_config  # noqa: E402
from hacrl_exp.report.alpha import best_alpha, load_alpha_trials  # noqa: E402
from hacrl_exp.sweep.settings import parse_settings  # noqa: E402
from hacrl_exp.sweep.studies import EdgeStudies  # noqa: E402
from hacrl_exp.trainer.validate import preflight  # noqa: E402
from tests.sweep.test_settings import raw_settings  # noqa: E402


def test_the_rule_on_hand_values():
    tied = separate_best([0.0, 0.0, 0.0], 400)
    assert (tied.best, tied.trials, tied.spread, tied.gap) == (None, 3, 0.0, 0.0)
    assert tied.reason() == "all 3 trials tied"
    clear = separate_best([0.5, 0.3], 100)  # noise sqrt((0.25 + 0.21) / 100) = 0.0678 < gap 0.2
    assert clear.best == 0 and clear.gap == pytest.approx(0.2) and clear.noise == pytest.approx(math.sqrt(0.0046))
    close = separate_best([0.30, 0.32], 100)  # gap 0.02 < noise sqrt((0.2176 + 0.21) / 100) = 0.0654
    assert close.best is None and close.top == 1 and close.noise == pytest.approx(math.sqrt(0.004276))
    assert close.reason() == "best − runner-up 0.0200 within one standard error 0.0654"
    assert separate_best([0.30, 0.32], None).best == 1  # n unknown: no noise, any difference separates
    assert separate_best([0.1, 0.5], 400, maximize=False).best == 0
    top_tie = separate_best([0.4, 0.6, 0.6], 400)
    assert (top_tie.best, top_tie.top, top_tie.runner_up) == (None, 1, 2)
    assert top_tie.reason() == "the top two trials tied"
    one = separate_best([0.7], 400)
    assert one.best is None and one.reason() == "1 complete trial: nothing to compare"
    assert separate_best([], 400).trials == 0
    assert effective_problems({"add3": 100, "add4": 100}, "accuracy/mean") == 200
    assert effective_problems({"a": 100, "b": 300}, "accuracy/mean") == pytest.approx(4 / (1 / 100 + 1 / 300))
    assert effective_problems({"a": 100, "b": 300}, "accuracy/b") == 300
    assert effective_problems({"a": 100}, "reward_mean") is None


def studies_for(tmp_path, agents: str, name: str) -> EdgeStudies:
    settings = parse_settings(raw_settings(study_name=name, sampler__name="random"), tmp_path)
    graph = graph_from_config(preflight([f"agents={agents}"]).agents, 1.0)
    return EdgeStudies(settings, list(graph.edges))


def tell_all(studies: EdgeStudies, values: dict[str, list[float]], counts: dict[str, int]) -> None:
    """One trial per value: each learner's final accuracy/mean as the job's summary reports it."""
    for trial, _ in enumerate(next(iter(values.values()))):
        asked = studies.ask()
        evals = {learner: {"accuracy/mean": v[trial]} for learner, v in values.items()}
        summary = {"output_dir": f"trial_{trial}", "run_ids": {"": ""}, "stopped_early": None, "last_step": 2}
        assert studies.tell(asked, {**summary, "evals": {2: evals}, "heldout_problems": counts}) == "COMPLETE"


def test_three_agent_study_with_every_trial_at_zero_has_no_best_alpha(tmp_path):
    studies = studies_for(tmp_path, "three_way", "three_zero")
    tell_all(studies, {n: [0.0, 0.0, 0.0] for n in ("opt_char", "gpt2_bpe", "llama_char")}, {"add2": 8})
    assert len(studies.studies) == 6 and all(trial is None for trial in studies.best().values())
    table = studies.table().splitlines()
    assert len(table) == 7
    for line in table[1:]:
        assert " none " in line and line.endswith("no best α: all 3 trials tied") and " 0.0000 " in line
    stale = tmp_path / "best_alpha" / "three_zero.yaml"  # left by an earlier trial that separated: removed
    stale.parent.mkdir()
    stale.write_text("agents: {members: {opt_char: {alpha_from: {gpt2_bpe: 2.0}}}}\n")
    assert studies.write_best() is None and not stale.exists()  # no best α anywhere: no file to include
    trials = load_alpha_trials(studies.settings.storage)
    best = best_alpha(trials)
    assert len(best) == 6 and best["alpha"].isna().all() and (best["spread"] == 0).all()
    assert (best["complete"] == 3).all() and (best["verdict"] == "no best α: all 3 trials tied").all()


def test_only_the_edge_whose_trials_separate_gets_an_alpha(tmp_path):
    studies = studies_for(tmp_path, "pair", "pair_sep")
    counts = {"add3": 100, "add4": 100}  # accuracy/mean over 200 problems
    tell_all(studies, {"opt_char": [0.30, 0.50, 0.32], "gpt2_bpe": [0.20, 0.22, 0.21]}, counts)
    edges = {f"{e.learner}<-{e.source}": t for e, t in studies.best().items()}
    assert edges["opt_char<-gpt2_bpe"].number == 1 and edges["gpt2_bpe<-opt_char"] is None
    winner = edges["opt_char<-gpt2_bpe"]
    assert winner.user_attrs["heldout_problems"] == 200
    table = studies.table()
    assert f"{'opt_char<-gpt2_bpe':<28} {winner.params['alpha']:>8.4g} {0.5:>14.4f} {1:>6} {0.2:>7.4f} {3:>3}" in table
    # gpt2_bpe: 0.22 vs 0.21, noise sqrt((0.22·0.78 + 0.21·0.79) / 200) = 0.0411
    assert "no best α: best − runner-up 0.0100 within one standard error 0.0411" in table
    path = studies.write_best()
    later = ["--config-dir", str(tmp_path), "agents=pair", "+best_alpha=pair_sep"]
    members = preflight(overrides_of(later) + config_dirs_of(later)).agents.members
    assert members["opt_char"].alpha_from == {"gpt2_bpe": winner.params["alpha"]}
    assert not members["gpt2_bpe"].alpha_from and "gpt2_bpe<-opt_char: no best α" in path.read_text()
    best = best_alpha(load_alpha_trials(studies.settings.storage)).set_index("learner")
    assert best.loc["opt_char", "alpha"] == winner.params["alpha"] and best.loc["opt_char", "verdict"] == "best α"
    assert math.isnan(best.loc["gpt2_bpe", "alpha"]) and best.loc["gpt2_bpe", "value"] == 0.22
    assert best.loc["gpt2_bpe", "spread"] == pytest.approx(0.02) and best.loc["gpt2_bpe", "trials"] == 3
