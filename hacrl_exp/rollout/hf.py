"""transformers `generate` rollout backend: batched, left-padded, KV-cached sampling.

Speed (docs/gpu.md; the vLLM backend stays the fast path for real runs):
  - generation_dtype: an agent whose weights are float32 (mixed precision by autocast) generates from a copy of
    its weights in bf16, refreshed before the first generation after each optimizer step, instead of casting every
    weight at every decoding step; an agent whose weights are already bf16 (master weights) generates from them.
  - cache="static": transformers' static KV cache, whose decoding steps transformers compiles (torch.compile,
    mode reduce-overhead: CUDA graphs) on CUDA; eager elsewhere.
  - sort_rows: a call with more rows than max_batch_size generates them sorted by prompt length, so that each chunk
    left-pads to a width close to its rows', and returns them in the given order.

How tokens are drawn (rollout.sampler):
  - counter (default): each generate call takes one call seed from the agent's torch stream; at decoding step t, row
    r of the call (its index in the whole call, whichever chunk or rank generates it) draws by inverse CDF over the
    warped softmax with u from splitmix64(splitmix64(splitmix64(call seed) + r) + t), a hash computed for the whole
    batch in one vectorised call on the model's device (`CounterSampler`). A row's tokens then do not depend on the
    rows batched with it, given the same logits, so a sharded agent splits its rows over its ranks and draws exactly
    what W = 1 draws (agents.sharding.RankSlicedEngine, which left-pads every rank's rows to the whole call's width
    so that the logits are the same too). Logits that differ in the last bits (another batch size's kernels,
    another padding) move a token only where u falls within that rounding of a boundary of the cumulative
    probabilities.
  - multinomial: `generate(do_sample=True)`, transformers' `torch.multinomial` from the agent's stream, one draw
    per step for the whole batch, so a row's sample depends on the rows it is batched with; unsharded agents only.
    It reproduces the runs of the commits before issue 36 (the published grids name their commit).
On one CPU thread, B = 16 rows over a 151,936-token vocabulary, the counter sampler's part of a decoding step
costs about half of softmax + `torch.multinomial` (`python -m benchmarks.sampler_step`; docs/performance.md).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence

import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase
from transformers.generation.logits_process import (
    LogitsProcessor,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from hacrl_exp.faults import crash_point
from hacrl_exp.rollout.base import Rollouts, SamplingSettings, compute_device, pad_and_stop_ids

SAMPLERS = ("counter", "multinomial")
CACHES = ("dynamic", "static")


def left_pad(
    rows: Sequence[list[int]], pad_id: int, device: torch.device, width: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack token lists into (B, L) ids and attention mask, padded on the left for generation.

    width: L (default: the longest row), so that a row is laid out the same whichever rows share its batch."""
    width = max(len(r) for r in rows) if width is None else width
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.tensor(row)
            mask[i, width - len(row) :] = 1
    return ids.to(device), mask.to(device)


def split_response(tokens: list[int], stop_ids: int | Collection[int], pad_id: int) -> tuple[list[int], bool]:
    """Cut a generated continuation at its first stop token: its EOS, or any id of `stop_ids` (an agent's stop set,
    agents.stops.stop_token_ids). Returns (ids without the stop token, finished).

    A response that is only a stop token keeps that token so that it still has a token to score (spec §1.3, C1).
    """
    stops = {stop_ids} if isinstance(stop_ids, int) else set(stop_ids)
    cut = next((i for i, token in enumerate(tokens) if token in stops), None)
    if cut is not None:
        return (tokens[:cut] or tokens[cut : cut + 1]), True
    while tokens and tokens[-1] == pad_id and pad_id not in stops:
        tokens = tokens[:-1]
    return tokens, False


SPLITMIX_GAMMA = 0x9E3779B97F4A7C15 - (1 << 64)
"""splitmix64's increment (the golden ratio · 2^64), as a signed int64."""
SPLITMIX_MULTIPLIERS = (0xBF58476D1CE4E5B9 - (1 << 64), 0x94D049BB133111EB - (1 << 64))


def splitmix64(state: torch.Tensor) -> torch.Tensor:
    """splitmix64's output for each int64 state (Steele, Lea & Flood 2014), elementwise on the state's device.

    z = state + γ; z = (z ⊕ (z ≫ 30)) · m1; z = (z ⊕ (z ≫ 27)) · m2; z ⊕ (z ≫ 31), all mod 2^64 with logical shifts.
    torch's int64 products wrap mod 2^64 (two's complement), as the unsigned ones do; `>>` on int64 is arithmetic, so
    each shift masks off the sign bits it copies in. tests/rollout/test_counter_sampler.py holds it to Python's exact
    arithmetic on CPU (not run on a GPU here)."""
    z = state + SPLITMIX_GAMMA
    z = (z ^ ((z >> 30) & ((1 << 34) - 1))) * SPLITMIX_MULTIPLIERS[0]
    z = (z ^ ((z >> 27) & ((1 << 37) - 1))) * SPLITMIX_MULTIPLIERS[1]
    return z ^ ((z >> 31) & ((1 << 33) - 1))


def row_keys(call_seed: int, rows: torch.Tensor) -> torch.Tensor:
    """k_r = splitmix64(splitmix64(call_seed) + r) for each int64 row index r (B,) of a call, int64 (B,) on the rows'
    device: the key of row r's counter stream, a function of (call seed, r) alone."""
    return splitmix64(splitmix64(torch.tensor(call_seed, dtype=torch.int64, device=rows.device)) + rows)


def counter_uniforms(keys: torch.Tensor, step: int) -> torch.Tensor:
    """u = (⌊h / 2^11⌋ + ½) · 2^-53 ∈ (0, 1) with h = splitmix64(k + step), float64 (B,) for row keys k (B,)
    (`row_keys`): the top 53 bits of the hash, centred in their interval so that u is never 0 or 1. One vectorised
    call for the whole batch, on the keys' device; nothing crosses to the host."""
    top = (splitmix64(keys + step) >> 11) & ((1 << 53) - 1)
    return (top.double() + 0.5) * 2.0**-53


def row_seed(call_seed: int, row: int) -> int:
    """A 63-bit seed for row `row` of a call: its key (`row_keys`) with the sign bit cleared, e.g. a vLLM request's
    SamplingParams.seed (rollout.vllm). The same (call seed, row) whichever rank or replica serves the row."""
    return int(row_keys(call_seed, torch.tensor([row])).item()) & ((1 << 63) - 1)


def sampling_warpers(sampling: SamplingSettings) -> LogitsProcessorList:
    """The warpers `generate(do_sample=True)` applies, in its order: temperature, top-k, top-p."""
    warpers = []
    if sampling.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(sampling.temperature))
    if sampling.top_k > 0:
        warpers.append(TopKLogitsWarper(sampling.top_k))
    if sampling.top_p < 1.0:
        warpers.append(TopPLogitsWarper(sampling.top_p))
    return LogitsProcessorList(warpers)


def inverse_cdf(warped: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """The token each row draws with its uniform: min{v : C_v > u · C_V}, C = cumsum(softmax(warped)) in float64.

    warped (B, V) scores after the warpers; uniform (B,) float64 in (0, 1); returns (B, 1) token ids. An exact draw
    from p = softmax(warped) up to float64 rounding; a token of zero probability is never drawn (C does not rise
    there). Its only cost beyond the softmax is a cumulative sum and a search."""
    cumulative = torch.softmax(warped.double(), dim=-1).cumsum(dim=-1)
    drawn = torch.searchsorted(cumulative, uniform.unsqueeze(1) * cumulative[:, -1:], right=True)
    return drawn.clamp_(max=warped.shape[1] - 1)  # u · C_V rounds up to C_V only when u is within 2^-53 of 1


class CounterSampler(LogitsProcessor):
    """Draws each row's next token by inverse CDF with a uniform that depends only on (call seed, row, step).

    At decoding step t (the t-th call in one `generate`), row i of the batch, whose index in the whole call is
    rows[i] (int64, on the model's device), draws with u = counter_uniforms(row_keys(call_seed, rows), t)[i] from the
    warped softmax (temperature, top-k, top-p, in `generate(do_sample=True)`'s order). So a row draws the same tokens
    alone, in any batch, in any chunk or on any rank, given the same logits. Returns 0 for the drawn token and −inf
    elsewhere, so greedy decoding (do_sample=False) takes it; a finished row draws too, touching no other row."""

    def __init__(self, call_seed: int, rows: torch.Tensor, sampling: SamplingSettings) -> None:
        self.keys, self.step = row_keys(call_seed, rows), 0
        self.warpers = sampling_warpers(sampling)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        uniform = counter_uniforms(self.keys, self.step)
        self.step += 1
        drawn = inverse_cdf(self.warpers(input_ids, scores), uniform)
        return torch.full_like(scores, -torch.inf).scatter_(1, drawn, 0.0)


def low_precision_copy(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A frozen copy of `model` whose floating parameters are `dtype` (buffers as they are), built without a
    full-precision intermediate copy; without the autocast forward of agents.precision (its weights are `dtype`)."""
    memo = {
        id(p): torch.nn.Parameter(p.detach().to(dtype) if p.is_floating_point() else p.detach(), requires_grad=False)
        for p in model.parameters()
    }
    clone = copy.deepcopy(model, memo)
    clone.__dict__.pop("forward", None)  # an instance-bound autocast forward (agents.precision.enable_autocast)
    return clone.eval()


class HFRolloutEngine:
    """Samples with the agent's own (training) model through `model.generate`.

    sampler: 'counter' (`CounterSampler`) or 'multinomial' (transformers' own, from the agent's torch stream; module
    docstring); generation_dtype, cache, sort_rows: the speed options (module docstring).
    optimizer: the agent's, whose steps make the low-precision copy stale. stop_ids: the ids generation stops at
    and responses are cut at (agents.stops.stop_token_ids); the tokenizer's EOS always among them, first."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_batch_size: int = 256,
        sampler: str = "counter",
        generation_dtype: torch.dtype | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        cache: str = "dynamic",
        sort_rows: bool = False,
        stop_ids: Sequence[int] = (),
    ):
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler={sampler!r} is not one of {SAMPLERS}")
        if cache not in CACHES:
            raise ValueError(f"cache={cache!r} is not one of {CACHES}")
        self.model, self.tokenizer, self.max_batch_size = model, tokenizer, max_batch_size
        self.sampler, self.cache, self.sort_rows = sampler, cache, sort_rows
        self.pad_id, self.stop_ids = pad_and_stop_ids(tokenizer, stop_ids)
        weights_dtype = next(model.parameters()).dtype
        self.generation_dtype = generation_dtype if generation_dtype not in (None, weights_dtype) else None
        self._copy: torch.nn.Module | None = None
        self._stale = True
        if self.generation_dtype is not None and optimizer is not None:
            optimizer.register_step_post_hook(lambda *_: self.mark_stale())

    def mark_stale(self) -> None:
        """The training weights changed: refresh the low-precision copy before the next generation."""
        self._stale = True

    def drop_copy(self) -> None:
        """Generate from the training model itself from now on (an agent about to be sharded: FSDP gathers it)."""
        self.generation_dtype, self._copy = None, None

    def generation_model(self) -> torch.nn.Module:
        """The model `generate` runs: the training model, or its low-precision copy, refreshed if stale."""
        if self.generation_dtype is None:
            return self.model
        if self._copy is None:
            self._copy, self._stale = low_precision_copy(self.model, self.generation_dtype), False
        elif self._stale:
            with torch.no_grad():
                torch._foreach_copy_(list(self._copy.parameters()), list(self.model.parameters()))
            self._stale = False
        return self._copy

    def _generation_config(self, sampling: SamplingSettings, drawn_by_processor: bool = False) -> GenerationConfig:
        kwargs = dict(
            max_new_tokens=sampling.max_new_tokens,
            eos_token_id=self.stop_ids[0] if len(self.stop_ids) == 1 else list(self.stop_ids),
            pad_token_id=self.pad_id,
            do_sample=not sampling.greedy and not drawn_by_processor,
        )
        if kwargs["do_sample"]:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=max(sampling.top_k, 0))
        if self.cache == "static":
            kwargs["cache_implementation"] = "static"
        return GenerationConfig(**kwargs)

    def call_seed(self, sampling: SamplingSettings) -> int | None:
        """The counter sampler's seed for one call: one draw from the torch stream in use (the agent's). None when
        the call does not draw by counter (greedy, or sampler=multinomial); then nothing is drawn here."""
        if self.sampler != "counter" or sampling.greedy:
            return None
        return int(torch.randint(0, 2**63 - 1, (1,)).item())

    def generate(self, prompt_ids: Sequence[list[int]], n: int, sampling: SamplingSettings) -> Rollouts:
        """n samples per prompt; rows are grouped by prompt (row r belongs to prompt r // n)."""
        rows = [list(p) for p in prompt_ids for _ in range(n)]
        return self.generate_rows(rows, sampling, self.call_seed(sampling))

    @torch.no_grad()
    def generate_rows(
        self,
        rows: Sequence[list[int]],
        sampling: SamplingSettings,
        call_seed: int | None = None,
        first_row: int = 0,
        width: int | None = None,
    ) -> Rollouts:
        """One response per prompt row, in max_batch_size chunks. call_seed: the `CounterSampler`'s, with row i
        of `rows` at index first_row + i of its call (a rank generating rows [lo, hi) of a call passes lo); None
        samples by transformers' multinomial from the torch stream in use (or decodes greedily). width: left-pad
        every chunk to it. With sort_rows and more than one chunk, the chunks take the rows in order of prompt
        length."""
        config = self._generation_config(sampling, call_seed is not None)
        model = self.generation_model()
        device = compute_device(model)
        was_training = model.training
        model.eval()
        order = list(range(len(rows)))
        if self.sort_rows and len(rows) > self.max_batch_size:
            order.sort(key=lambda r: len(rows[r]))  # stable: equal lengths keep their order
        responses, finished = [None] * len(rows), [False] * len(rows)
        for start in range(0, len(rows), self.max_batch_size):
            picked = order[start : start + self.max_batch_size]
            ids, mask = left_pad([rows[r] for r in picked], self.pad_id, device, width)
            drawn = {}
            if call_seed is not None:
                index = torch.tensor(picked, dtype=torch.int64, device=device) + first_row
                drawn = {"logits_processor": LogitsProcessorList([CounterSampler(call_seed, index, sampling)])}
            # synced_gpus=False: transformers would sync every decoding step of an FSDP-managed model with its
            # peers, but a sharded agent generates on gathered weights (agents.sharding.gathered), each rank alone
            # and on its own rows (RankSlicedEngine), so the ranks' call and step counts may differ
            out = model.generate(
                input_ids=ids, attention_mask=mask, generation_config=config, synced_gpus=False, **drawn
            )
            crash_point("generate")  # fault-injection hook (hacrl_exp.faults); a no-op unless HACRL_CRASH_AT is set
            for r, continuation in zip(picked, out[:, ids.shape[1] :].tolist()):
                responses[r], finished[r] = split_response(continuation, self.stop_ids, self.pad_id)
        model.train(was_training)
        texts = self.tokenizer.batch_decode(responses, skip_special_tokens=True)
        return Rollouts(prompt_ids=list(rows), response_ids=responses, texts=texts, finished=finished)
