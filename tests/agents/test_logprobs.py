"""Log-probs are scored at the sampling temperature (issue 17 fidelity: verl divides logits by T before the softmax)."""

import pytest
import torch

from hacrl_exp.agents.agent import build_agent
from hacrl_exp.agents.logprobs import batched_response_logprobs, response_logprobs
from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.config.schema import AgentConfig
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.tasks.arithmetic import ArithmeticTask
from hacrl_exp.trainer.rollouts import collect_rollouts

TASK = ArithmeticTask(tiers=["add2"], eval_per_tier=4)
TOKENIZER = build_tokenizer("char", TASK.alphabet)


def tiny_model():
    return build_tiny_model("gpt2", TOKENIZER, hidden_size=32, num_layers=2, num_heads=4, seed=0)


def by_hand(model, prompt: list[int], response: list[int], temperature: float) -> torch.Tensor:
    """log softmax(z / T)[y_t] at the position before each response token, one sequence, no padding."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return torch.stack([logp[len(prompt) - 1 + t, y] for t, y in enumerate(response)])


@pytest.mark.parametrize("temperature", [0.6, 1.0, 1.7])
def test_token_logprobs_use_the_sampling_temperature(temperature):
    model = tiny_model()
    prompts = [TOKENIZER("12+34=")["input_ids"], TOKENIZER("5+6=")["input_ids"]]
    responses = [TOKENIZER("46")["input_ids"], TOKENIZER("11|x")["input_ids"]]
    with torch.no_grad():
        logp, mask = response_logprobs(model, prompts, responses, TOKENIZER.pad_token_id, temperature)
    for row, (p, r) in enumerate(zip(prompts, responses)):
        torch.testing.assert_close(logp[row, : len(r)], by_hand(model, p, r, temperature), rtol=1e-5, atol=1e-6)
        assert mask[row].sum() == len(r)
    if temperature != 1.0:  # a different distribution: the fix matters
        with torch.no_grad():
            plain, _ = response_logprobs(model, prompts, responses, TOKENIZER.pad_token_id)
        assert (plain[mask] - logp[mask]).abs().max() > 1e-3


def test_old_logprobs_of_a_rollout_are_scored_at_its_temperature():
    """collect_rollouts scores the source's own responses with the temperature they were sampled at, so the
    spec's π_old is the distribution that produced them (the T = 1 scores differ, previous test)."""
    model = tiny_model()
    agent = build_agent(
        "a",
        AgentConfig(),
        model,
        TOKENIZER,
        device=torch.device("cpu"),
        kl_coef=0.0,
        max_prompt_tokens=32,
        max_batch_size=8,
    )
    problems = TASK.train_problems(step=1, n=2)
    for temperature in (0.7, 1.3):
        torch.manual_seed(0)
        sampling = SamplingSettings(temperature=temperature, max_new_tokens=8)
        times = dict.fromkeys(("generate", "reward", "score_own"), 0.0)
        own = collect_rollouts(agent, 0, problems, 2, sampling, TASK, 4, times)
        expected = batched_response_logprobs(model, own.prompt_ids, own.response_ids, agent.pad_id, 4, temperature)
        for got, want in zip(own.old_token_logp, expected):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
