"""trainer.step.update: rows with advantage exactly 0 are not run, and the update is the same as when they are; what
an update costs (cost/* of docs/metrics.md) and several passes over a batch (update-matched GSPO)."""

import copy
import dataclasses

import pytest
import torch

from hacrl_exp.agents.agent import Agent
from hacrl_exp.agents.logprobs import response_logprobs
from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.algo import MiniBatch, minibatch_schedule
from hacrl_exp.config.schema import AgentConfig, AgentsConfig, AlgorithmConfig, Config, TrainerConfig
from hacrl_exp.rollout.hf import HFRolloutEngine
from hacrl_exp.tasks.arithmetic import ArithmeticTask
from hacrl_exp.trainer import step
from hacrl_exp.trainer.costs import CostMeter, zero_costs
from hacrl_exp.trainer.params import learner_params
from hacrl_exp.trainer.step import LearnerBatch

TASK = ArithmeticTask(tiers=["add2"], eval_per_tier=4)
P, G = 4, 4


def make_agent(kl: bool) -> Agent:
    tokenizer = build_tokenizer("char", TASK.alphabet)
    model = build_tiny_model("opt", tokenizer, hidden_size=32, num_layers=2, num_heads=4, seed=0)
    reference = copy.deepcopy(model) if kl else None
    # eps=1 keeps Adam near-linear in the gradient, so float32 summation order cannot be amplified by 1/sqrt(v)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1.0, eps=1.0, weight_decay=0.0)
    return Agent("a", model, tokenizer, HFRolloutEngine(model, tokenizer), optimizer, reference, False, 64)


def make_batch(agent: Agent, advantages: list[float]) -> LearnerBatch:
    """Two blocks (self, one source) of P·G rows; old log-probs a little off the model's so ratios vary."""
    problems = TASK.train_problems(step=1, n=P)
    rows = 2 * P * G
    prompt_ids = [agent.prompt_ids(problems[(r % (P * G)) // G].prompt) for r in range(rows)]
    response_ids = [
        agent.tokenizer(problems[(r % (P * G)) // G].solution[: 5 + r % 7])["input_ids"] for r in range(rows)
    ]
    with torch.no_grad():
        logp, mask = response_logprobs(agent.model, prompt_ids, response_ids, agent.pad_id)
    generator = torch.Generator().manual_seed(0)
    old_token = [
        logp[r, : int(mask[r].sum())].double() + 0.05 * torch.randn(1, generator=generator).double()
        for r in range(rows)
    ]
    return LearnerBatch(
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        source=torch.tensor([0] * (P * G) + [1] * (P * G)),
        is_self=torch.tensor([True] * (P * G) + [False] * (P * G)),
        advantages=torch.tensor(advantages, dtype=torch.float64),
        old_mean_logp=torch.stack([t.mean() for t in old_token]),
        loss_weight=torch.tensor([1.0] * (P * G) + [0.7] * (P * G), dtype=torch.float64),
        alpha=torch.tensor([0.0] * (P * G) + [1.0] * (P * G), dtype=torch.float64),
        old_token_logp=old_token,
        ref_token_logp=old_token,
        block_sizes=[P * G, P * G],
        temperature=1.0,
    )


# the second self mini-batch (rows 8-15) is all zeros: a step whose gradient is 0 must still move Adam's moments
ADVANTAGES = [0.8, -0.8, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0] + [0.0] * 8 + [1.1, 0.0, -0.4, 0.0] * 4


@pytest.mark.parametrize("algorithm,kl_coef", [("hacpo", 0.0), ("hacpo", 0.1), ("naive", 0.0), ("grpo", 0.0)])
def test_skipping_zero_advantage_rows_gives_the_same_update(algorithm, kl_coef):
    algo_cfg = AlgorithmConfig(name=algorithm, kl_coef=kl_coef)
    trainer = TrainerConfig(prompts_per_step=P, group_size=G, minibatches_per_block=2, micro_batch_size=3)
    results = {}
    for skip in (True, False):
        agent = make_agent(kl=kl_coef > 0)
        batch = make_batch(agent, ADVANTAGES)
        metrics = agent_update(agent, batch, algorithm, algo_cfg, trainer, skip)
        results[skip] = (metrics, [p.detach().clone() for p in agent.model.parameters()])
    (skipped, params_skip), (full, params_full) = results[True], results[False]
    initial = [p.detach() for p in make_agent(False).model.parameters()]
    moved = max(float((a - b).abs().max()) for a, b in zip(params_full, initial))
    assert moved > 1e-3  # the update did something
    for a, b in zip(params_skip, params_full):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert skipped["train/updates"] == full["train/updates"] == 4
    cross_run = sum(a != 0 for a in ADVANTAGES[P * G :])
    self_run = P * G if kl_coef > 0 else sum(a != 0 for a in ADVANTAGES[: P * G])  # KL rows always run
    expected_run = (self_run + cross_run) / len(ADVANTAGES)
    assert skipped["train/rows_run_share"] == pytest.approx(expected_run) and full["train/rows_run_share"] == 1.0
    assert skipped["train/loss"] == pytest.approx(full["train/loss"], rel=1e-5, abs=1e-9)


def agent_update(agent, batch, algorithm, algo_cfg, trainer, skip, cost=None):
    agents = AgentsConfig(members={"a": AgentConfig(), "b": AgentConfig()})
    params = learner_params(Config(agents=agents, algorithm=algo_cfg, trainer=trainer))[0]
    return step.update(agent, batch, dataclasses.replace(params, skip_zero_advantage=skip), ["a", "b"], cost)


def test_update_counts_its_costs_and_update_matched_gspo_passes_twice_over_its_own_rows():
    """cost/* of one update, by hand: the rows run (A ≠ 0) and their prompt + response tokens, once per pass; an
    optimizer step for every mini-batch (the all-zero one too: Adam's moments still move)."""
    trainer = TrainerConfig(prompts_per_step=P, group_size=G, minibatches_per_block=2, micro_batch_size=3)
    agent = make_agent(kl=False)
    batch = make_batch(agent, ADVANTAGES)
    run = [r for r, a in enumerate(ADVANTAGES) if a != 0]  # 2 self rows, 8 cross rows
    tokens = sum(len(batch.prompt_ids[r]) + len(batch.response_ids[r]) for r in run)
    meter = CostMeter()
    agent_update(agent, batch, "hacpo", AlgorithmConfig(name="hacpo"), trainer, True, meter)
    assert meter.take() == {**zero_costs(), "trained_rows": 10, "updates": 4, "forward_tokens": tokens,
                            "backward_tokens": tokens}  # fmt: skip
    own = P * G  # update-matched GSPO: its own block alone, 2 mini-batches per pass, 2 passes
    alone = dataclasses.replace(
        batch, **{f: getattr(batch, f)[:own] for f in ("prompt_ids", "response_ids", "source", "is_self", "advantages",
                                                       "old_mean_logp", "loss_weight", "alpha", "old_token_logp",
                                                       "ref_token_logp")}, block_sizes=[own]
    )  # fmt: skip
    agent = make_agent(kl=False)
    algo = AlgorithmConfig(name="gspo_update_matched")
    metrics = agent_update(agent, alone, "gspo_update_matched", algo, trainer, True, meter)
    self_tokens = sum(len(batch.prompt_ids[r]) + len(batch.response_ids[r]) for r in run if r < own)
    assert metrics["train/updates"] == 4 and meter.counts["updates"] == 4
    assert meter.counts["trained_rows"] == 2 * 2 and meter.counts["backward_tokens"] == 2 * self_tokens


def test_passes_repeat_the_schedule_with_u_continuing():
    assert minibatch_schedule([8], 4, passes=2) == [MiniBatch(0, 4, 0), MiniBatch(4, 8, 1), MiniBatch(0, 4, 2),
                                                    MiniBatch(4, 8, 3)]  # fmt: skip
    restart = minibatch_schedule([4, 4], 2, restart_per_source=True, passes=2)
    assert [mb.u for mb in restart] == [0, 1, 0, 1, 2, 3, 2, 3] and restart[4:] == [
        MiniBatch(mb.start, mb.stop, mb.u + 2) for mb in restart[:4]
    ]
    assert minibatch_schedule([5, 3], 4) == minibatch_schedule([5, 3], 4, passes=1)
    with pytest.raises(ValueError, match="passes=0"):
        minibatch_schedule([8], 4, passes=0)
