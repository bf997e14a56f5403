"""Non-finite numbers: NaN or inf in the new log-probs, the old (rollout) log-probs, the ratios or the loss make the
step's updates skip (logged as train/skipped_updates and a warning) and the run goes on; after trainer.max_bad_steps bad
steps in a row it stops with one clear NumericsError and the MLflow runs end FAILED. The capability tracker never
divides by zero, whatever the rewards."""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hacrl_exp.algo.objectives as objectives
import hacrl_exp.trainer.loop as loop
import hacrl_exp.trainer.step as update
from hacrl_exp.algo import capability_aware_advantages
from hacrl_exp.errors import NumericsError
from hacrl_exp.trainer.capability_estimates import CapabilityEstimates
from hacrl_exp.trainer.metrics import read_metrics
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides
from tests.reliability.hooks import on_step_start

NAN, INF = float("nan"), float("inf")


class Faults:
    """Injects NaN/inf into one quantity per step, in the order given, on steps where some update has a gradient.

    A step whose advantages are all 0 runs no update, so a fault armed then waits for the next step that does.
    `fired` maps each step to the quantity poisoned in it. The step is read from the loop's task.train_problems.
    """

    def __init__(self, monkeypatch, faults: list[str]) -> None:
        self.pending, self.armed, self.fired = list(faults), None, {}
        self.step, self.ran = 0, False
        on_step_start(monkeypatch, self.next_step)

        def poison(module, name, transform):
            real = getattr(module, name)

            def wrapped(*args, **kwargs):
                self.ran = self.ran or name == "response_logprobs"  # an update ran its model: it had a gradient
                out = real(*args, **kwargs)
                return transform(out) if self.armed == name else out

            monkeypatch.setattr(module, name, wrapped)

        poison(update, "response_logprobs", lambda out: (out[0] * NAN, out[1]))  # the learner's new log-probs
        poison(update, "sequence_log_ratio", lambda out: out + INF)  # the importance ratios
        poison(objectives, "sequence_policy_terms", lambda out: replace(out, objective=out.objective * INF))  # the loss
        poison(update, "batched_response_logprobs", lambda out: [t * NAN for t in out])  # the rollout's old log-probs

    def next_step(self, step: int) -> None:
        if self.armed is not None and self.ran:
            self.fired[self.step] = self.armed
            self.armed = None
        if self.armed is None and self.pending:
            self.armed = self.pending.pop(0)
        self.step, self.ran = step, False


def run(tmp_path, steps: int, *extra: str):
    config = preflight([*tiny_overrides("pair", steps), *extra])
    return loop.train(config, tmp_path)


FAULTS = ["response_logprobs", "sequence_log_ratio", "sequence_policy_terms", "batched_response_logprobs"]


def test_bad_steps_are_skipped_logged_and_the_run_goes_on(tmp_path, monkeypatch, caplog):
    faults = Faults(monkeypatch, FAULTS)
    with caplog.at_level(logging.WARNING, logger="hacrl_exp.trainer.step"):
        summary = run(tmp_path, 12, "trainer.max_bad_steps=5")
    assert summary["last_step"] == 12
    assert sorted(faults.fired.values()) == sorted(FAULTS)  # each quantity was poisoned on a step that updated
    rows = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "train/skipped_updates" in r]
    for r in rows:
        ran = r["train/updates"] - r["train/empty_updates"]
        assert r["train/skipped_updates"] == (ran if r["step"] in faults.fired else 0), r
        assert all(math.isfinite(v) for k, v in r.items() if k in ("train/loss", "train/grad_norm")), (
            r
        )  # never logged as NaN
    skipped = {r["step"] for r in rows if r["train/skipped_updates"]}
    assert skipped == set(faults.fired)
    assert any(
        r["step"] > max(skipped) and r["train/updates"] > r["train/empty_updates"] for r in rows
    )  # it learns again
    assert caplog.text.count("update skipped") == sum(r["train/skipped_updates"] for r in rows)
    import mlflow

    client = mlflow.MlflowClient()
    logged = set()
    for name in ("opt_char", "gpt2_bpe"):
        logged |= {
            m.step for m in client.get_metric_history(summary["run_ids"][name], "train/skipped_updates") if m.value
        }
    assert logged == skipped


def test_too_many_bad_steps_abort_with_one_clear_error(tmp_path, monkeypatch):
    import mlflow

    faults = Faults(monkeypatch, ["sequence_policy_terms"] * 20)
    with pytest.raises(NumericsError) as info:
        run(tmp_path, 20, "trainer.max_bad_steps=3")
    message = str(info.value)
    assert message.startswith("3 consecutive steps had non-finite gradients") and "trainer.max_bad_steps" in message
    rows = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "train/skipped_updates" in r]
    bad = sorted({r["step"] for r in rows if r["train/skipped_updates"]})
    assert len(bad) == 3 and max(r["step"] for r in rows) == bad[-1]  # stopped at the third bad step, logged
    assert bad == sorted(faults.fired)[:2] + [bad[-1]]
    runs = mlflow.search_runs(experiment_names=["hacrl"], output_format="list")
    assert len(runs) == 3 and {r.info.status for r in runs} == {"FAILED"}


# --- the capability tracker never divides by zero ----------------------------------------------------------------

binary = st.lists(st.sampled_from([0.0, 1.0]), min_size=2, max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_agents=st.integers(1, 3),
    window=st.integers(1, 4),
    steps=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=8),
    data=st.data(),
)
def test_capability_is_finite_for_any_rewards(n_agents, window, steps, data):
    """All-zero rewards, a category absent for many steps, or a window of zeros: P̂, ρ, 1/ρ, the metrics and the
    advantages built from them stay finite and ρ in [0.1, 10]."""
    categories = ["a", "b"]
    estimates = CapabilityEstimates(n_agents, categories, window, 0, "category")
    names = [f"agent{i}" for i in range(n_agents)]
    for all_zero, only_a in steps:
        rows = data.draw(st.integers(2, 6))
        rewards = [
            torch.zeros(rows, dtype=torch.float64)
            if all_zero
            else torch.tensor(data.draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=rows, max_size=rows)))
            for _ in range(n_agents)
        ]
        row_categories = ["a"] * rows if only_a else [categories[r % 2] for r in range(rows)]
        estimates.update(rewards, [row_categories] * n_agents)
        for prompt_categories in (["a"], ["a", "b"]):
            rho = estimates.loss_weights(prompt_categories)
            assert torch.isfinite(rho).all() and (rho >= 0.1).all() and (rho <= 10).all()
            assert torch.isfinite(1.0 / rho).all()
        for i in range(n_agents):
            assert all(math.isfinite(v) for v in estimates.metrics(i, names).values())
        if n_agents > 1:
            joint = torch.stack(rewards, dim=1).reshape(rows, n_agents)[:, :].repeat(1, 2)
            source = torch.arange(n_agents).repeat(2)
            adv = capability_aware_advantages(joint, source, 0, 1.0 / estimates.batch.loss_weights()[0])
            assert torch.isfinite(adv).all()
