"""Log-probs are scored at the sampling temperature (issue 17 fidelity: verl divides logits by T before the softmax)."""

import functools

import pytest
import torch

from hacrl_exp.agents.agent import build_agent
from hacrl_exp.agents.logprobs import batched_response_logprobs, response_logprobs
from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.config.schema import AgentConfig
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.tasks.arithmetic import ArithmeticTask
from hacrl_exp.trainer.step import collect_rollouts

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


def qwen3_model(vocab: int, seed: int = 0):
    import transformers

    config = transformers.Qwen3Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                      max_position_embeddings=64, tie_word_embeddings=True)  # fmt: skip
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()


def rows(vocab: int, seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, vocab, (4 + 3 * i,), generator=g).tolist() for i in range(4)]
    responses = [torch.randint(3, vocab, (9 - 2 * i,), generator=g).tolist() for i in range(4)]
    return prompts, responses


def logp_and_grads(model, prompts, responses, temperature, path):
    model.zero_grad(set_to_none=True)
    logp, mask = response_logprobs(model, prompts, responses, 0, temperature, path)
    weights = torch.linspace(-1.0, 2.0, logp.numel()).view_as(logp)  # a loss that weighs every token differently
    (logp * weights).sum().backward()
    return logp.detach(), mask, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("temperature", [1.0, 0.6, 1.7])
@pytest.mark.parametrize("family", ["opt", "gpt2", "qwen3"])
def test_chunked_path_equals_the_full_logits_with_gradients(family, temperature, monkeypatch):
    """Hidden states at the response positions only, projected and log-softmaxed a few rows at a time, with the
    backward recomputing each chunk: the same log-probs and the same gradient of every weight as the full logits,
    within 1e-6 in float32 (issue 25), at T = 1 and T ≠ 1; here over 4 chunks of 5 rows."""
    import hacrl_exp.agents.logprobs as logprobs

    if family == "qwen3":
        model, vocab = qwen3_model(vocab=1000), 1000
    else:
        model, vocab = build_tiny_model(family, TOKENIZER, hidden_size=32, num_layers=2, num_heads=4, seed=0), 17
    monkeypatch.setattr(logprobs, "CHUNK_BYTES", 5 * 4 * model.config.vocab_size)  # 5 rows per chunk
    prompts, responses = rows(len(TOKENIZER) if family != "qwen3" else vocab)
    full, mask, full_grads = logp_and_grads(model, prompts, responses, temperature, "full")
    chunked, chunked_mask, chunked_grads = logp_and_grads(model, prompts, responses, temperature, "chunked")
    assert torch.equal(mask, chunked_mask) and int(mask.sum()) == 24  # 24 response tokens: 4 full chunks + 4
    assert (full - chunked).abs().max() <= 1e-6
    assert (chunked[~mask] == 0).all()
    for name, grad in full_grads.items():
        scale = max(1.0, float(grad.abs().max()))
        assert (grad - chunked_grads[name]).abs().max() <= 1e-6 * scale, name


def test_chunked_path_never_holds_the_micro_batch_logits():
    """The real 151,936 vocabulary: the full path's backward peaks at over 3 copies of the micro-batch's float32 logits,
    the chunked one below one copy (the profiler's allocator events, benchmarks.memory_peaks)."""
    import hacrl_exp.agents.logprobs as logprobs
    from benchmarks.memory_peaks import allocated_peak

    model = qwen3_model(vocab=151936)
    prompts, responses = rows(151936)
    logits_bytes = len(prompts) * max(len(p) + len(r) for p, r in zip(prompts, responses)) * 151936 * 4
    peaks = {}
    for path in ("full", "chunked"):
        run = functools.partial(logp_and_grads, model, prompts, responses, 1.0, path)
        peaks[path] = allocated_peak(run, warmup=run)
    assert peaks["full"] > 3 * logits_bytes
    assert peaks["chunked"] < logits_bytes
    assert logprobs.logprob_path(model, 4, 16) == "full" and logprobs.logprob_path(model, 64, 64) == "chunked"


def test_the_path_is_full_where_the_head_cannot_be_replaced():
    import hacrl_exp.agents.logprobs as logprobs

    model = qwen3_model(vocab=1000)
    assert logprobs.logprob_path(model, 1, 8, "chunked") == "chunked"
    model.config.model_type = "gemma2"  # soft-capped logits: the head is not the whole story
    assert logprobs.logprob_path(model, 10**6, 8, "chunked") == "full"
    model.config.model_type = "qwen3"
    model.lm_head = torch.nn.Linear(32, 1000, bias=True)  # a head with a bias (or a LoRA-wrapped one)
    assert logprobs.output_head(model) is None and logprobs.logprob_path(model, 10**6, 8) == "full"
    with pytest.raises(ValueError, match="logprob path 'fast'"):
        logprobs.logprob_path(model, 1, 8, "fast")


def test_a_forced_path_holds_for_auto_calls_within_its_block_only():
    """benchmarks.memory_peaks and before_after measure one path through the trainer's update, which asks for 'auto'."""
    import hacrl_exp.agents.logprobs as logprobs

    model = qwen3_model(vocab=1000)
    assert logprobs.logprob_path(model, 1, 8) == "full" and logprobs.chunk_rows(1000) == logprobs.CHUNK_BYTES // 4000
    with logprobs.forced_path("chunked", chunk_bytes=5 * 4 * 1000):
        assert logprobs.logprob_path(model, 1, 8) == "chunked" and logprobs.chunk_rows(1000) == 5
        assert logprobs.logprob_path(model, 1, 8, "full") == "full"  # an explicit path is kept
        with logprobs.forced_path("full"):
            assert logprobs.logprob_path(model, 10**6, 8) == "full" and logprobs.chunk_rows(1000) > 5
        assert logprobs.logprob_path(model, 1, 8) == "chunked" and logprobs.chunk_rows(1000) == 5
    assert logprobs.logprob_path(model, 1, 8) == "full" and logprobs.chunk_rows(1000) == logprobs.CHUNK_BYTES // 4000
    with pytest.raises(ValueError, match="logprob path 'fast'"), logprobs.forced_path("fast"):
        pass


def test_chunked_path_under_bf16_autocast_matches_the_full_one():
    """Under autocast both paths take the head's matmul in bf16 and the log-softmax in float32."""
    from hacrl_exp.agents.precision import enable_autocast

    model = qwen3_model(vocab=1000)
    enable_autocast(model, torch.bfloat16)
    prompts, responses = rows(1000)
    with torch.no_grad():
        full, mask = response_logprobs(model, prompts, responses, 0, 1.0, "full")
        chunked, _ = response_logprobs(model, prompts, responses, 0, 1.0, "chunked")
    assert full.dtype == chunked.dtype == torch.float32
    assert (full - chunked)[mask].abs().max() <= 1e-6
