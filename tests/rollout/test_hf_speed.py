"""The hf backend's speed options keep what it samples: rows sorted by prompt length come back in order, the bf16
copy follows the optimizer, the static cache decodes what the dynamic one does, and draws follow the warped softmax."""

import math

import pytest
import torch

from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.rollout.hf import HFRolloutEngine

TOKENIZER = build_tokenizer("char", "0123456789+=,|")
GREEDY = SamplingSettings(temperature=0.0, max_new_tokens=8)


def model(arch="llama", seed=0):
    return build_tiny_model(arch, TOKENIZER, hidden_size=32, num_layers=2, num_heads=4, seed=seed)


def prompts() -> list[list[int]]:
    texts = ["12+7=", "3+45=", "8=", "60+21+9=", "5+9=", "77+1=", "1=", "123+456="]
    return [TOKENIZER(t)["input_ids"] for t in texts]


@pytest.mark.parametrize("arch", ["llama", "opt"])
def test_sorted_chunks_return_rows_in_the_given_order(arch):
    m = model(arch)
    whole = HFRolloutEngine(m, TOKENIZER).generate(prompts(), 2, GREEDY)  # one chunk, no sorting
    sorted_engine = HFRolloutEngine(m, TOKENIZER, max_batch_size=3, sort_rows=True)
    assert sorted_engine.generate(prompts(), 2, GREEDY).response_ids == whole.response_ids
    # the counter sampler: a row's draws depend on (call seed, row, step) alone, so sorting changes no row's sample
    rows = [p for p in prompts() for _ in range(2)]
    width = max(len(r) for r in rows)
    sampling = SamplingSettings(temperature=1.0, max_new_tokens=8)
    plain = HFRolloutEngine(m, TOKENIZER).generate_rows(rows, sampling, 7, 0, width)
    sorted_rows = HFRolloutEngine(m, TOKENIZER, max_batch_size=5, sort_rows=True)
    assert sorted_rows.generate_rows(rows, sampling, 7, 0, width).response_ids == plain.response_ids


def test_static_cache_decodes_what_the_dynamic_cache_does():
    m = model()
    dynamic = HFRolloutEngine(m, TOKENIZER, max_batch_size=4).generate(prompts(), 1, GREEDY)
    static = HFRolloutEngine(m, TOKENIZER, max_batch_size=4, cache="static").generate(prompts(), 1, GREEDY)
    assert static.response_ids == dynamic.response_ids


def test_the_bf16_copy_is_refreshed_after_each_optimizer_step():
    m = model()
    optimizer = torch.optim.AdamW(m.parameters(), lr=1e-2)
    engine = HFRolloutEngine(m, TOKENIZER, generation_dtype=torch.bfloat16, optimizer=optimizer)
    copy = engine.generation_model()
    assert copy is not m and all(p.dtype == torch.bfloat16 for p in copy.parameters())
    assert all(p.dtype == torch.float32 for p in m.parameters())  # the training weights are untouched
    engine.generate(prompts(), 1, GREEDY)
    ids = torch.tensor([prompts()[0]])
    m(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    assert engine.generation_model() is copy  # refreshed in place, not rebuilt
    for a, b in zip(copy.parameters(), m.parameters()):
        assert torch.equal(a, b.detach().to(torch.bfloat16))
    # the same dtype as the weights: no copy
    assert HFRolloutEngine(m, TOKENIZER, generation_dtype=torch.float32).generation_model() is m


def test_sorted_bf16_static_draws_follow_the_warped_softmax():
    """3000 one-token draws (agent stream, bf16 copy, rows sorted into chunks of 512, static cache) from two prompts
    of different lengths, interleaved: each token's frequency among a prompt's rows is within 5 binomial standard
    deviations of its probability under that prompt's softmax at temperature 0.5, top-k 4 (others never drawn; a tie
    at the 4th score keeps both, as transformers' TopKLogitsWarper does)."""
    torch.manual_seed(0)
    m = model(seed=3)
    with torch.no_grad():  # layers that add nothing: the next token's distribution is set by the last prompt token
        for name, param in m.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                param.zero_()
        m.get_output_embeddings().weight.mul_(3.0)
    engine = HFRolloutEngine(m, TOKENIZER, max_batch_size=512, generation_dtype=torch.bfloat16, cache="static",
                             sort_rows=True)  # fmt: skip
    short, long = TOKENIZER("7+8")["input_ids"], TOKENIZER("123+45+6")["input_ids"]
    sampling = SamplingSettings(temperature=0.5, top_k=4, max_new_tokens=1)
    out = engine.generate([short, long] * 1500, 1, sampling)
    assert out.prompt_ids[:2] == [short, long]
    bf16 = engine.generation_model()
    for which, prompt in enumerate((short, long)):
        drawn = [r[0] if r else TOKENIZER.eos_token_id for r in out.response_ids[which::2]]
        counts = torch.bincount(torch.tensor(drawn), minlength=len(TOKENIZER)).double()
        with torch.no_grad():
            logits = bf16(input_ids=torch.tensor([prompt])).logits[0, -1].float() / 0.5
        kept = logits >= logits.topk(4).values[-1]  # transformers' top-k keeps ties with the k-th score
        expected = torch.softmax(logits.double().masked_fill(~kept, -math.inf), 0)
        n = len(drawn)
        for token in range(len(TOKENIZER)):
            p = float(expected[token])
            if p == 0:
                assert counts[token] == 0, (token, counts)
            else:
                assert abs(counts[token] / n - p) < 5 * math.sqrt(p * (1 - p) / n), (which, token, counts, expected)
    # the two prompts' distributions differ, so rows returned out of order would have failed above
    assert not torch.allclose(
        torch.softmax(bf16(input_ids=torch.tensor([short])).logits[0, -1].float(), 0),
        torch.softmax(bf16(input_ids=torch.tensor([long])).logits[0, -1].float(), 0),
        atol=0.05,
    )
