"""rollout.sample_stream=row: each row draws from its own generator, so a row's sample does not depend on the rows
batched with it, and the draw is an exact sample of the warped softmax."""

import math

import pytest
import torch

from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.rollout.hf import HFRolloutEngine, RowSampler, row_seeds

TOKENIZER = build_tokenizer("char", "0123456789+=,|")
SAMPLING = SamplingSettings(temperature=1.0, max_new_tokens=12)


@pytest.fixture(scope="module", params=["opt", "llama"])
def engine(request) -> HFRolloutEngine:
    model = build_tiny_model(request.param, TOKENIZER, hidden_size=32, num_layers=2, num_heads=4, seed=0)
    return HFRolloutEngine(model, TOKENIZER, sample_stream="row")


def prompts() -> list[list[int]]:
    texts = ["12+7=", "3+45=", "8+8=", "60+21=", "5+9=", "77+1="]
    return [TOKENIZER(t)["input_ids"] for t in texts]


def test_a_row_draws_the_same_whatever_it_is_batched_with(engine):
    rows = [p for p in prompts() for _ in range(2)]
    seeds = row_seeds(1234, len(rows))
    width = max(len(r) for r in rows)
    whole = engine.generate_rows(rows, SAMPLING, seeds, width)
    halves = [engine.generate_rows(rows[i : i + 6], SAMPLING, seeds[i : i + 6], width) for i in (0, 6)]
    engine.max_batch_size = 5  # chunks of 5, 5, 2
    try:
        chunked = engine.generate_rows(rows, SAMPLING, seeds, width)
    finally:
        engine.max_batch_size = 256
    assert halves[0].response_ids + halves[1].response_ids == whole.response_ids
    assert chunked.response_ids == whole.response_ids
    # and the draws are random: the two rows of each prompt mostly differ (a tiny untrained model is near uniform)
    assert sum(whole.response_ids[i] != whole.response_ids[i + 1] for i in range(0, 12, 2)) >= 5


def test_generate_takes_one_number_from_the_agent_stream(engine):
    torch.manual_seed(7)
    first = engine.generate(prompts(), 2, SAMPLING)
    after = torch.randint(0, 10**9, (1,)).item()
    torch.manual_seed(7)
    torch.randint(0, 2**63 - 1, (1,))
    assert torch.randint(0, 10**9, (1,)).item() == after
    torch.manual_seed(7)
    assert engine.generate(prompts(), 2, SAMPLING).response_ids == first.response_ids
    torch.manual_seed(8)
    assert engine.generate(prompts(), 2, SAMPLING).response_ids != first.response_ids


def test_greedy_draws_nothing_and_ignores_the_stream(engine):
    greedy = SamplingSettings(temperature=0.0, max_new_tokens=8)
    assert engine.row_seeds(4, greedy) is None
    torch.manual_seed(0)
    a = engine.generate(prompts(), 1, greedy)
    torch.manual_seed(1)
    assert engine.generate(prompts(), 1, greedy).response_ids == a.response_ids


def test_the_draw_follows_the_warped_softmax():
    """Draw 4000 rows of one token; each token's frequency is within 5 binomial standard deviations of its
    probability after temperature 0.7 and top-k 4 (tokens outside the top 4 are never drawn)."""
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -0.5, -3.0]])
    sampling = SamplingSettings(temperature=0.7, top_k=4)
    rows = 4000
    sampler = RowSampler(row_seeds(99, rows), sampling)
    drawn = sampler(torch.zeros((rows, 1), dtype=torch.long), logits.expand(rows, -1).clone())
    assert torch.all((drawn == 0).sum(dim=1) == 1) and torch.all(drawn.isinf().sum(dim=1) == 5)
    counts = torch.bincount(drawn.argmax(dim=1), minlength=6).double()
    expected = torch.softmax(logits[0, :4].double() / 0.7, dim=0)
    for token in range(4):
        p = expected[token].item()
        assert abs(counts[token].item() / rows - p) < 5 * math.sqrt(p * (1 - p) / rows), (token, counts, expected)
    assert counts[4:].sum() == 0


def test_top_k_one_is_greedy(engine):
    torch.manual_seed(3)
    top1 = engine.generate(prompts(), 2, SamplingSettings(temperature=1.0, top_k=1, max_new_tokens=8))
    greedy = engine.generate(prompts(), 2, SamplingSettings(temperature=0.0, max_new_tokens=8))
    assert top1.response_ids == greedy.response_ids


def test_row_seeds_are_distinct_and_depend_on_the_call_seed():
    seeds = row_seeds(5, 64)
    assert len(set(seeds)) == 64
    assert row_seeds(5, 64) == seeds and row_seeds(6, 64) != seeds
    assert row_seeds(5, 8) == seeds[:8]


def test_unknown_sample_stream_is_refused():
    model = build_tiny_model("opt", TOKENIZER, hidden_size=16, num_layers=1, num_heads=2, seed=0)
    with pytest.raises(ValueError, match="sample_stream='rows'"):
        HFRolloutEngine(model, TOKENIZER, sample_stream="rows")
