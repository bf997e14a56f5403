"""hacrl_exp.agents.sharding on two real gloo ranks (forked processes, tests/gloo_ranks.py): the loopback rendezvous,
the full weights a tensor-parallel vLLM engine would load, and data-parallel generation and scoring equal to one
unsharded agent's."""

from __future__ import annotations

import pytest
import torch

from tests.gloo_ranks import join_cpu_group, run_ranks

WORLD = 2
OVERRIDES = [
    "agents=solo",
    "algorithm=gspo",
    "agents.members.opt_char.warm_start.steps=0",
    "rollout.max_new_tokens=12",
    "tracking.backend=none",
]


def _rank(rank: int, ports, folder: str) -> None:
    from torch.distributed.tensor import DTensor

    from hacrl_exp.agents.factory import make_agent
    from hacrl_exp.agents.logprobs import batched_response_logprobs
    from hacrl_exp.agents.sharding import (
        RankSlicedEngine,
        full_weights,
        gathered,
        rank_sliced_logprobs,
        shard_agent,
    )
    from hacrl_exp.rollout.base import SamplingSettings, compute_device
    from hacrl_exp.tasks import build_task
    from hacrl_exp.trainer.validate import preflight

    torch.set_num_threads(1)
    config = preflight(OVERRIDES)
    task = build_task(config.task)
    agent = make_agent(config, task, torch.device("cpu"), 0)
    unsharded = {name: tensor.clone() for name, tensor in agent.model.state_dict().items()}
    prompts = [agent.prompt_ids(p.prompt) for p in task.train_problems(1, 3)]
    sampling = SamplingSettings(temperature=1.0, max_new_tokens=12)
    torch.manual_seed(11)
    expected = agent.engine.generate(prompts, 3, sampling)  # W = 1, the counter sampler: 9 rows
    scoring = (expected.prompt_ids, expected.response_ids, agent.pad_id, 4, 0.7)  # chunks of 4, 4, 1 rows
    expected_logp = batched_response_logprobs(agent.model, *scoring)
    torch.manual_seed(12)
    one_row = agent.engine.generate(prompts[:1], 1, sampling)

    listening = join_cpu_group(rank, WORLD, ports)
    handed_over = listening is None or listening.fileno() == -1  # the store owns (and will close) the descriptor
    shard_agent(agent, config.agents.members["opt_char"])
    weights = dict(full_weights(agent.model))
    engine = RankSlicedEngine(agent.engine)
    with gathered(agent.model):
        torch.manual_seed(11)
        split = engine.generate(prompts, 3, sampling)  # rows 0-3 here on rank 0, 4-8 on rank 1, then gathered
        logp = rank_sliced_logprobs(agent.model, *scoring)  # rows 0-3 on rank 0 (one chunk), 4-8 on rank 1 (two)
        # the ranks call generate a different number of times (2 chunks of 2 rows here, 3 there; then none on
        # rank 0): each decodes alone, no step waits for a peer
        agent.engine.max_batch_size = 2
        torch.manual_seed(11)
        chunked = engine.generate(prompts, 3, sampling)
        torch.manual_seed(12)
        alone = engine.generate(prompts[:1], 1, sampling)
    result = {
        "handed_over": handed_over,
        "sharded": all(isinstance(p, DTensor) for p in agent.model.parameters()),
        "device": str(compute_device(agent.model)),
        "keys": sorted(weights) == sorted(unsharded),
        "weights": all(torch.equal(weights[k], unsharded[k]) for k in unsharded),
        "responses": split.response_ids == expected.response_ids and split.texts == expected.texts,
        "finished": split.finished == expected.finished,
        "prompts": split.prompt_ids == expected.prompt_ids,
        "rows": len(split.response_ids),
        "uneven": chunked.response_ids == expected.response_ids and alone.response_ids == one_row.response_ids,
        "logprobs": len(logp) == 9
        and all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(logp, expected_logp)),
    }
    torch.distributed.destroy_process_group()
    torch.save(result, f"{folder}/rank{rank}.pt")


def test_two_ranks_gather_the_full_weights_and_split_generation_exactly(tmp_path):
    run_ranks(_rank, WORLD, str(tmp_path))
    for rank in range(WORLD):
        result = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        assert result == {
            "handed_over": True,
            "sharded": True,
            "device": "cpu",
            "keys": True,
            "weights": True,
            "responses": True,
            "finished": True,
            "prompts": True,
            "rows": 9,
            "uneven": True,
            "logprobs": True,
        }, rank


def test_rank_zero_needs_its_listening_socket():
    from hacrl_exp.agents.sharding import init_rank_group

    with pytest.raises(ValueError, match="rank 0 hosts the rendezvous store"):
        init_rank_group(0, 2, 12345, torch.device("cpu"))
