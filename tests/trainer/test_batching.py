"""Length-bucketed micro-batches (trainer.step.micro_batches, on CUDA): every row once, similar lengths together, and
the update they give equals the one of micro-batches in schedule order (the same per-row terms, summed in another
order)."""

import pytest
import torch

from hacrl_exp.config.schema import AlgorithmConfig, TrainerConfig
from hacrl_exp.trainer.step import micro_batches
from tests.trainer.test_update import ADVANTAGES, agent_update, make_agent, make_batch


def test_buckets_hold_every_row_once_sorted_by_length():
    rows = torch.arange(3, 13)
    lengths = {r: (r * 7) % 5 + 10 for r in range(20)}
    plain = micro_batches(rows, lengths, 4, bucket=False)
    assert [b.tolist() for b in plain] == [[3, 4, 5, 6], [7, 8, 9, 10], [11, 12]]
    bucketed = micro_batches(rows, lengths, 4, bucket=True)
    flat = [int(r) for b in bucketed for r in b]
    assert sorted(flat) == list(range(3, 13)) and [len(b) for b in bucketed] == [4, 4, 2]
    assert [lengths[r] for r in flat] == sorted(lengths[r] for r in range(3, 13))
    assert micro_batches(torch.arange(0), lengths, 4, bucket=True) == []


@pytest.mark.parametrize("algorithm", ["hacpo", "grpo"])
def test_bucketed_micro_batches_give_the_same_update(algorithm, monkeypatch):
    algo_cfg = AlgorithmConfig(name=algorithm)
    trainer = TrainerConfig(prompts_per_step=4, group_size=4, minibatches_per_block=2, micro_batch_size=3)
    params = {}
    for bucket in (False, True):
        monkeypatch.setattr("hacrl_exp.trainer.step.length_bucketed", lambda model, on=bucket: on)
        agent = make_agent(kl=False)
        batch = make_batch(agent, ADVANTAGES)
        assert len(set(batch.lengths)) > 3  # rows of mixed lengths: bucketing reorders them
        agent_update(agent, batch, algorithm, algo_cfg, trainer, True)
        params[bucket] = [p.detach().clone() for p in agent.model.parameters()]
    for a, b in zip(params[False], params[True]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
