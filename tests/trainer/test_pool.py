"""trainer.step.build_batch (pool → learner batch): self-first block order, re-tokenised cross rows, advantages and
per-row weights, and what each mechanism switch changes."""

import pytest
import torch

from hacrl_exp.agents.tiny import build_tokenizer
from hacrl_exp.algo import (
    ObjectiveParams,
    capability_aware_advantages,
    get_algorithm,
    group_relative_advantages,
    resolve_mechanisms,
)
from hacrl_exp.config.schema import MechanismsConfig
from hacrl_exp.graph import build_graph
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.tasks.arithmetic import ArithmeticTask
from hacrl_exp.trainer.params import LearnerParams
from hacrl_exp.trainer.step import SourceRollouts, build_batch, retokenize

TASK = ArithmeticTask(tiers=["add3", "mul31"], eval_per_tier=4)
NAMES = ["a", "b", "c"]
P, G = 3, 4


@pytest.fixture(scope="module")
def tokenizers():
    char = build_tokenizer("char", TASK.alphabet)
    bpe = build_tokenizer("bpe", TASK.alphabet, TASK.sample_texts(500), vocab_size=64)
    return {"a": char, "b": bpe, "c": char}


def source_rollouts(agent: int, tokenizer, rewards: list[float]) -> SourceRollouts:
    problems = TASK.train_problems(step=1, n=P)
    texts = [problems[r // G].solution for r in range(P * G)]
    response_ids = retokenize(texts, tokenizer, 64)
    prompt_ids = [tokenizer(problems[r // G].prompt)["input_ids"] for r in range(P * G)]
    old = [torch.full((len(ids),), -0.1 * (agent + 1)) for ids in response_ids]
    return SourceRollouts(
        agent=agent,
        prompt_index=[r // G for r in range(P * G)],
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        texts=texts,
        rewards=torch.tensor(rewards, dtype=torch.float64),
        old_token_logp=old,
        sampling=SamplingSettings(max_new_tokens=64),
        categories=[problems[r // G].category for r in range(P * G)],
        problem_prompt_ids=prompt_ids[::G],
    )


def test_retokenize_round_trip_between_different_tokenizers(tokenizers):
    text = TASK.train_problems(step=3, n=1)[0].solution
    char_ids = retokenize([text], tokenizers["a"], 256)[0]
    bpe_ids = retokenize([text], tokenizers["b"], 256)[0]
    assert char_ids != bpe_ids and len(bpe_ids) < len(char_ids)
    assert tokenizers["a"].decode(char_ids) == text == tokenizers["b"].decode(bpe_ids)
    assert retokenize([""], tokenizers["b"], 8) == [[tokenizers["b"].eos_token_id]]  # EOS-only keeps one EOS
    assert len(retokenize([text], tokenizers["a"], 5)[0]) == 5  # right-truncated


def learner_a(algorithm: str, switches: MechanismsConfig) -> LearnerParams:
    """Learner a's parameters: sources b (α 1) and c (α 3) when the algorithm shares rollouts."""
    algo = get_algorithm(algorithm)
    graph = build_graph(NAMES, "all_to_all", {}, 1.0, {"a": {"c": 3.0}}, {})
    edges = graph.sources_of("a") if algo.shares_rollouts else []
    return LearnerParams(
        index=0,
        sources=tuple(NAMES.index(e.source) for e in edges),
        joint_group=algo.shares_rollouts,
        mechanisms=resolve_mechanisms(switches, algo, {NAMES.index(e.source): e.alpha for e in edges}, 0.025),
        objective=algo.objective,
        objective_params=ObjectiveParams(3e-4, 4e-4),
        token_level=algo.token_level,
        delta=0.2,
        restart_u_per_source=False,
        minibatch_size=P * G,
        micro_batch_size=4,
        adv_eps=1e-6,
        kl_coef=0.0,
        kl_aggregation="seq_mean_token_mean",
        max_grad_norm=1.0,
    )


def build(tokenizers, algorithm="hacpo", mechanisms=MechanismsConfig(), p_hat=(0.5, 0.75, 0.25)):
    rewards = {0: [1, 0, 0, 1] * P, 1: [1, 1, 0, 1] * P, 2: [0, 0, 0, 1] * P}
    pool = {i: source_rollouts(i, tokenizers[n], rewards[i]) for i, n in enumerate(NAMES)}
    p = torch.tensor(p_hat, dtype=torch.float64)
    rho = (p / p[0]).clamp(0.1, 10)  # ρ(j→a) = P̂_j / P̂_a
    shared = {j: pool[j].shared() for j in (1, 2)}
    batch = build_batch(pool[0], shared, rho, tokenizers["a"], learner_a(algorithm, mechanisms))
    return batch, pool, rho


def test_learner_batch_is_self_first_in_declared_source_order(tokenizers):
    batch, pool, _ = build(tokenizers)
    assert batch.block_sizes == [P * G] * 3
    assert batch.source.tolist() == [0] * (P * G) + [1] * (P * G) + [2] * (P * G)
    assert batch.is_self.tolist() == [True] * (P * G) + [False] * (2 * P * G)
    # cross rows are the partners' texts in the learner's tokenizer, with the source's old mean log-prob
    assert batch.response_ids[P * G] == retokenize([pool[1].texts[0]], tokenizers["a"], 64)[0]
    assert batch.old_mean_logp[P * G].item() == pytest.approx(-0.2)
    assert batch.alpha.tolist() == [0.0] * (P * G) + [1.0] * (P * G) + [3.0] * (P * G)


def test_learner_batch_advantages_and_weights_follow_spec(tokenizers):
    batch, pool, rho = build(tokenizers)
    rewards = torch.cat([pool[i].rewards.view(P, G) for i in range(3)], dim=1)
    columns = torch.tensor([0] * G + [1] * G + [2] * G)
    expected = capability_aware_advantages(rewards, columns, 0, 1 / rho)
    got = torch.cat([batch.advantages[b * P * G : (b + 1) * P * G].view(P, G) for b in range(3)], dim=1)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert batch.loss_weight.tolist() == [1.0] * (P * G) + [rho[1].item()] * (P * G) + [rho[2].item()] * (P * G)


def test_mechanism_switches_change_only_their_part(tokenizers):
    full, _, _ = build(tokenizers)
    no_omega, _, _ = build(tokenizers, mechanisms=MechanismsConfig(omega=False))
    assert torch.equal(no_omega.advantages, full.advantages)  # baseline weights kept (spec §2.2 toggled off)
    assert no_omega.loss_weight.tolist() == [1.0] * len(full)
    no_adv, pool, _ = build(tokenizers, mechanisms=MechanismsConfig(capability_advantage=False))
    naive, _, _ = build(tokenizers, algorithm="naive")
    torch.testing.assert_close(no_adv.advantages, naive.advantages, rtol=0, atol=0)  # unweighted joint mean
    no_is, _, _ = build(tokenizers, mechanisms=MechanismsConfig(exponential_is=False))
    assert no_is.alpha.abs().sum() == 0


def test_gspo_batch_holds_only_own_rollouts(tokenizers):
    batch, pool, _ = build(tokenizers, algorithm="gspo")
    assert batch.block_sizes == [P * G] and bool(batch.is_self.all())
    expected = group_relative_advantages(pool[0].rewards.view(P, G)).reshape(-1)
    torch.testing.assert_close(batch.advantages, expected, rtol=0, atol=0)
