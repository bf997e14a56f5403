"""The sampling temperature has one source: the worker's `SamplingSettings`, read by both halves of every ratio.

It samples the step's responses, scores their old log-probs (spec §1.2) and travels with the rollouts to the
learner's update, which scores the new log-probs at the same temperature, so an on-policy ratio is 1 at any T.
"""

import dataclasses

import pytest
import torch

from hacrl_exp.agents.logprobs import response_logprobs
from hacrl_exp.trainer import step
from hacrl_exp.trainer.params import learner_params
from hacrl_exp.trainer.validate import preflight
from hacrl_exp.trainer.worker import AgentWorker
from tests.e2e.tiny import tiny_overrides


@pytest.fixture(scope="module")
def worker():
    config = preflight([*tiny_overrides("pair"), "algorithm=gspo", "agents.members.gpt2_bpe.warm_start.steps=0"])
    return AgentWorker(config, 0, learner_params(config).get(0))


def own_rollouts(worker, temperature: float):
    """The worker's rollouts of step 1 after its one sampling object is changed to `temperature`."""
    worker.sampling = dataclasses.replace(worker.sampling, temperature=temperature)
    worker.rollout(worker.task.train_problems(1, 4), 4, 1)
    return worker._own


def new_mean_logp(worker, batch) -> torch.Tensor:
    """The learner's new mean log-probs of its own rows, scored as `step.update` scores them (batch.temperature)."""
    own = torch.arange(len(batch))[batch.is_self]
    prompts, responses = [batch.prompt_ids[r] for r in own], [batch.response_ids[r] for r in own]
    with torch.no_grad():
        logp, mask = response_logprobs(worker.agent.model, prompts, responses, worker.agent.pad_id, batch.temperature)
    return ((logp * mask).sum(-1) / mask.sum(-1)).double()


@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.8])
def test_changing_the_one_temperature_changes_both_scoring_paths(worker, temperature):
    own = own_rollouts(worker, temperature)
    assert own.sampling is worker.sampling and own.sampling.temperature == temperature
    params = learner_params(worker.config)[0]
    assert not any(field.name == "temperature" for field in dataclasses.fields(params))  # no second copy
    batch = step.build_batch(own, {}, torch.ones(2, dtype=torch.float64), worker.agent.tokenizer, params)
    assert batch.temperature == temperature
    # on-policy, before any update: the new log-probs equal the old ones, so s = 1, at every temperature
    torch.testing.assert_close(new_mean_logp(worker, batch), own.old_mean_logp, rtol=0, atol=1e-5)
    # and the temperature matters: scored at T = 1 instead, a T ≠ 1 rollout's log-probs differ
    if temperature != 1.0:
        plain = dataclasses.replace(batch, temperature=1.0)
        assert (new_mean_logp(worker, plain) - own.old_mean_logp).abs().max() > 1e-3
