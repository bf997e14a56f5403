"""rollout.sampler=inverse_cdf: the agent stream draws one uniform per row and searches the cumulative probabilities.
The draw is an exact sample of the warped softmax, it comes from the torch stream in use, and only the agent stream
of the hf backend takes it."""

import math

import pytest
import torch

from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.errors import ConfigError
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.rollout.hf import HFRolloutEngine, InverseCdfSampler
from hacrl_exp.trainer.validate import preflight

TOKENIZER = build_tokenizer("char", "0123456789+=,|")
SAMPLING = SamplingSettings(temperature=1.0, max_new_tokens=12)


def prompts() -> list[list[int]]:
    return [TOKENIZER(t)["input_ids"] for t in ["12+7=", "3+45=", "8+8="]]


@pytest.fixture(scope="module")
def engines() -> dict[str, HFRolloutEngine]:
    model = build_tiny_model("llama", TOKENIZER, hidden_size=32, num_layers=2, num_heads=4, seed=0)
    return {s: HFRolloutEngine(model, TOKENIZER, sampler=s) for s in ("multinomial", "inverse_cdf")}


def test_the_draw_follows_the_warped_softmax():
    """8000 rows of one token: each frequency within 5 binomial SDs of its probability after temperature 0.7 and
    top-p 0.9; the tokens top-p removes, and a token of probability exactly 0, are never drawn."""
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -0.5, -float("inf"), -4.0]])
    sampling = SamplingSettings(temperature=0.7, top_p=0.9)
    rows = 8000
    torch.manual_seed(11)
    drawn = InverseCdfSampler(sampling)(torch.zeros((rows, 1), dtype=torch.long), logits.expand(rows, -1).clone())
    assert torch.all((drawn == 0).sum(dim=1) == 1) and torch.all(drawn.isinf().sum(dim=1) == 6)
    counts = torch.bincount(drawn.argmax(dim=1), minlength=7).double()
    p = torch.softmax(logits[0].double() / 0.7, dim=0)
    kept = torch.cumsum(p, 0) - p < 0.9  # top-p keeps the smallest prefix (sorted here) whose mass reaches 0.9
    expected = torch.where(kept, p, 0.0) / p[kept].sum()
    for token in range(7):
        q = expected[token].item()
        assert abs(counts[token].item() / rows - q) <= 5 * math.sqrt(q * (1 - q) / rows), (token, counts, expected)
    assert counts[~kept].sum() == 0 and not kept[5]


def test_a_one_hot_distribution_always_draws_its_token():
    logits = torch.full((3, 151_936), -float("inf"))
    logits[[0, 1, 2], [0, 77_777, 151_935]] = 0.0
    drawn = InverseCdfSampler(SAMPLING)(torch.zeros((3, 1), dtype=torch.long), logits)
    assert drawn.argmax(dim=1).tolist() == [0, 77_777, 151_935]


def test_generate_draws_from_the_torch_stream_in_use(engines):
    engine = engines["inverse_cdf"]
    torch.manual_seed(5)
    first = engine.generate(prompts(), 2, SAMPLING)
    torch.manual_seed(5)
    assert engine.generate(prompts(), 2, SAMPLING).response_ids == first.response_ids
    torch.manual_seed(6)
    assert engine.generate(prompts(), 2, SAMPLING).response_ids != first.response_ids
    # a random tiny model is near uniform: the two rows of a prompt mostly differ
    assert sum(first.response_ids[i] != first.response_ids[i + 1] for i in range(0, 6, 2)) >= 2


def test_greedy_decoding_is_the_same_under_either_sampler(engines):
    greedy = SamplingSettings(temperature=0.0, max_new_tokens=8)
    torch.manual_seed(0)
    multinomial = engines["multinomial"].generate(prompts(), 1, greedy)
    torch.manual_seed(1)
    assert engines["inverse_cdf"].generate(prompts(), 1, greedy).response_ids == multinomial.response_ids


def test_only_the_agent_stream_takes_it():
    model = build_tiny_model("opt", TOKENIZER, hidden_size=16, num_layers=1, num_heads=2, seed=0)
    with pytest.raises(ValueError, match="sampler='inverse_cdf' draws from the agent stream"):
        HFRolloutEngine(model, TOKENIZER, sample_stream="row", sampler="inverse_cdf")
    with pytest.raises(ValueError, match="sampler='gumbel'"):
        HFRolloutEngine(model, TOKENIZER, sampler="gumbel")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["rollout.sampler=gumbel"], "rollout.sampler"),
        (["rollout.sampler=inverse_cdf", "rollout.sample_stream=row"], "rollout.sampler=inverse_cdf draws from"),
        (["rollout.sampler=inverse_cdf", "rollout=vllm"], "rollout.sampler=inverse_cdf draws from"),
    ],
)
def test_a_config_that_cannot_take_it_fails_in_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message):
        preflight(overrides)
