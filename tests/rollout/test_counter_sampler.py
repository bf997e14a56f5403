"""rollout.sampler=counter (the default): row r of a call draws at decoding step t by inverse CDF with a uniform hashed
from (call seed, r, t). The hash is splitmix64's, its uniforms lie in (0, 1); a row's tokens do not depend on the rows
batched with it; the draws follow the warped softmax; the call seed is one number from the agent's stream."""

import math

import pytest
import torch

from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.errors import ConfigError, exit_on_bad_input
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.rollout.hf import CounterSampler, HFRolloutEngine, counter_uniforms, row_keys, row_seed, splitmix64
from hacrl_exp.trainer.validate import preflight

TOKENIZER = build_tokenizer("char", "0123456789+=,|")
SAMPLING = SamplingSettings(temperature=1.0, max_new_tokens=12)
MASK = (1 << 64) - 1


def exact_splitmix64(x: int) -> int:
    """splitmix64 in Python's exact integers (Steele, Lea & Flood 2014; Vigna's reference C)."""
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


@pytest.fixture(scope="module", params=["opt", "llama"])
def engine(request) -> HFRolloutEngine:
    model = build_tiny_model(request.param, TOKENIZER, hidden_size=32, num_layers=2, num_heads=4, seed=0)
    return HFRolloutEngine(model, TOKENIZER)


def sixty_four_rows() -> list[list[int]]:
    texts = ["12+7=", "3+45=", "8+8=", "60+21=", "5+9=", "77+1=", "1=", "123+456="]
    return [TOKENIZER(t)["input_ids"] for t in texts for _ in range(8)]


def test_the_hash_is_splitmix64_in_exact_arithmetic():
    rows = torch.arange(0, 512, dtype=torch.int64) * 1_000_003  # rows far apart too
    for seed in (0, 1, 123_456_789, 2**63 - 2):
        for step in (0, 1, 47, 10**6):
            got = [h & MASK for h in splitmix64(row_keys(seed, rows) + step).tolist()]
            keys = [exact_splitmix64((exact_splitmix64(seed) + r) & MASK) for r in rows.tolist()]
            assert got == [exact_splitmix64((k + step) & MASK) for k in keys]
    assert row_seed(5, 3) == exact_splitmix64((exact_splitmix64(5) + 3) & MASK) & ((1 << 63) - 1)


def test_uniforms_lie_in_the_open_interval_are_deterministic_and_differ_across_rows_steps_and_seeds():
    rows = torch.arange(20_000, dtype=torch.int64)
    u = counter_uniforms(row_keys(7, rows), 0)
    assert u.dtype == torch.float64 and u.shape == (20_000,)
    assert 0 < u.min().item() and u.max().item() < 1
    assert torch.equal(u, counter_uniforms(row_keys(7, rows), 0))
    assert len(set(u.tolist())) == 20_000
    others = [counter_uniforms(row_keys(7, rows), 1), counter_uniforms(row_keys(8, rows), 0)]
    for other in [*others, counter_uniforms(row_keys(7, rows + 1), 0)]:
        assert (other != u).float().mean() > 0.999
    # uniform: the mean within 5 SDs of 1/2 (SD √(1/12n)), each of 10 bins within 5 binomial SDs of n/10
    assert abs(u.mean().item() - 0.5) < 5 * math.sqrt(1 / 12 / 20_000)
    counts = torch.bincount((u * 10).long(), minlength=10).double()
    assert torch.all((counts - 2000).abs() < 5 * math.sqrt(20_000 * 0.1 * 0.9)), counts
    # a row's uniforms do not depend on the other rows passed with it
    assert torch.equal(
        counter_uniforms(row_keys(7, rows[[5, 17_000]]), 3), counter_uniforms(row_keys(7, rows), 3)[[5, 17_000]]
    )


def frequencies_match(drawn: torch.Tensor, expected: torch.Tensor) -> None:
    """Each token's frequency among the draws within 5 binomial SDs of its probability; probability 0: never."""
    n = drawn.numel()
    counts = torch.bincount(drawn, minlength=expected.numel()).double()
    for token, q in enumerate(expected.tolist()):
        if q == 0:
            assert counts[token] == 0, (token, counts, expected)
        else:
            assert abs(counts[token].item() / n - q) <= 5 * math.sqrt(q * (1 - q) / n), (token, counts, expected)


LOGITS = torch.tensor([[2.0, 1.0, 0.5, 0.0, -0.5, -float("inf"), -4.0]])


def test_rows_draw_the_warped_softmax_temperature_and_top_p():
    """8000 rows of one token at temperature 0.7, top-p 0.9: the tokens top-p removes, and a token of probability
    exactly 0, are never drawn."""
    rows = 8000
    sampler = CounterSampler(11, torch.arange(rows), SamplingSettings(temperature=0.7, top_p=0.9))
    drawn = sampler(torch.zeros((rows, 1), dtype=torch.long), LOGITS.expand(rows, -1).clone())
    assert torch.all((drawn == 0).sum(dim=1) == 1) and torch.all(drawn.isinf().sum(dim=1) == 6)
    p = torch.softmax(LOGITS[0].double() / 0.7, dim=0)
    kept = torch.cumsum(p, 0) - p < 0.9  # top-p keeps the smallest prefix (sorted here) whose mass reaches 0.9
    frequencies_match(drawn.argmax(dim=1), torch.where(kept, p, 0.0) / p[kept].sum())


def test_one_row_over_many_steps_draws_the_warped_softmax_temperature_and_top_k():
    """One row, 6000 decoding steps (the step counter advances per call) at temperature 1.5, top-k 4."""
    sampler = CounterSampler(99, torch.tensor([3]), SamplingSettings(temperature=1.5, top_k=4))
    drawn = torch.cat(
        [sampler(torch.zeros((1, 1), dtype=torch.long), LOGITS.clone()).argmax(dim=1) for _ in range(6000)]
    )
    assert sampler.step == 6000
    expected = torch.softmax(LOGITS[0].double() / 1.5, dim=0)
    expected[4:] = 0
    frequencies_match(drawn, expected / expected.sum())


def test_a_one_hot_distribution_always_draws_its_token():
    logits = torch.full((3, 151_936), -float("inf"))
    logits[[0, 1, 2], [0, 77_777, 151_935]] = 0.0
    drawn = CounterSampler(1, torch.arange(3), SAMPLING)(torch.zeros((3, 1), dtype=torch.long), logits)
    assert drawn.argmax(dim=1).tolist() == [0, 77_777, 151_935]


def test_a_row_draws_the_same_alone_in_16_and_in_64(engine):
    rows = sixty_four_rows()
    width = max(len(r) for r in rows)
    whole = engine.generate_rows(rows, SAMPLING, 1234, 0, width).response_ids
    sixteen = engine.generate_rows(rows[16:32], SAMPLING, 1234, 16, width).response_ids
    assert sixteen == whole[16:32]
    for r in (0, 21, 63):
        assert engine.generate_rows(rows[r : r + 1], SAMPLING, 1234, r, width).response_ids == whole[r : r + 1]
        assert engine.generate_rows(rows[r : r + 1], SAMPLING, 1234, r).response_ids == whole[r : r + 1]  # own width
    engine.max_batch_size = 5  # chunks of 5 rows, in order of prompt length
    engine.sort_rows = True
    try:
        assert engine.generate_rows(rows, SAMPLING, 1234, 0, width).response_ids == whole
    finally:
        engine.max_batch_size, engine.sort_rows = 256, False
    # and the draws are random: the 8 rows of each prompt mostly differ (a tiny untrained model is near uniform)
    assert sum(len({tuple(r) for r in whole[i : i + 8]}) for i in range(0, 64, 8)) >= 7 * 8


def test_generate_takes_one_number_from_the_agent_stream(engine):
    prompts = sixty_four_rows()[::8]
    torch.manual_seed(7)
    first = engine.generate(prompts, 2, SAMPLING)
    after = torch.randint(0, 10**9, (1,)).item()
    torch.manual_seed(7)
    seed = int(torch.randint(0, 2**63 - 1, (1,)).item())
    assert torch.randint(0, 10**9, (1,)).item() == after
    rows = [p for p in prompts for _ in range(2)]
    assert engine.generate_rows(rows, SAMPLING, seed).response_ids == first.response_ids
    torch.manual_seed(8)
    assert engine.generate(prompts, 2, SAMPLING).response_ids != first.response_ids


def test_greedy_draws_nothing_and_top_k_one_is_greedy(engine):
    prompts = sixty_four_rows()[::8]
    greedy = SamplingSettings(temperature=0.0, max_new_tokens=8)
    assert engine.call_seed(greedy) is None
    torch.manual_seed(0)
    a = engine.generate(prompts, 1, greedy)
    assert torch.randint(0, 10**9, (1,)).item() == (torch.manual_seed(0), torch.randint(0, 10**9, (1,)).item())[1]
    torch.manual_seed(1)
    assert engine.generate(prompts, 1, greedy).response_ids == a.response_ids
    top1 = engine.generate(prompts, 1, SamplingSettings(temperature=1.0, top_k=1, max_new_tokens=8))
    assert top1.response_ids == a.response_ids


def test_multinomial_is_transformers_own_from_the_agent_stream(engine):
    multinomial = HFRolloutEngine(engine.model, TOKENIZER, sampler="multinomial")
    prompts = sixty_four_rows()[::8]
    assert multinomial.call_seed(SAMPLING) is None
    torch.manual_seed(3)
    first = multinomial.generate(prompts, 2, SAMPLING)
    torch.manual_seed(3)
    assert multinomial.generate(prompts, 2, SAMPLING).response_ids == first.response_ids
    with pytest.raises(ValueError, match="sampler='gumbel'"):
        HFRolloutEngine(engine.model, TOKENIZER, sampler="gumbel")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["rollout.sample_stream=row"], "rollout.sample_stream is not a config key. Did you mean rollout.sampler?"),
        (["rollout.sampler=inverse_cdf"], "rollout.sampler='inverse_cdf' is not one of ['counter', 'multinomial']"),
        (["rollout.sampler=multinomial", "rollout=vllm"], "rollout.sampler=multinomial is transformers' own"),
        (
            ["executor=ray", "agents.members.opt_char.world_size=2", "rollout.sampler=multinomial"],
            "rollout.sampler=multinomial draws one stream for the whole batch, so the ranks of a sharded agent",
        ),
        (
            ["executor=ray", "agents.members.opt_char.fsdp.offload=true", "rollout.sampler=multinomial"],
            "a sharded agent (opt_char) cannot split its rows",
        ),
    ],
)
def test_a_config_the_sampler_cannot_take_fails_in_one_line_with_exit_2(overrides, message, capsys):
    with pytest.raises(SystemExit) as stop, exit_on_bad_input():
        preflight(overrides)
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and err.count("\n") == 0 and message in err, err
    with pytest.raises(ConfigError):
        preflight(overrides)
