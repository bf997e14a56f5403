"""transformers `generate` rollout backend: batched, left-padded, KV-cached sampling.

Speed (docs/gpu.md; the vLLM backend stays the fast path for real runs):
  - generation_dtype: an agent whose weights are float32 (mixed precision by autocast) generates from a copy of
    its weights in bf16, refreshed before the first generation after each optimizer step, instead of casting every
    weight at every decoding step; an agent whose weights are already bf16 (master weights) generates from them.
  - cache="static": transformers' static KV cache, whose decoding steps transformers compiles (torch.compile,
    mode reduce-overhead: CUDA graphs) on CUDA; eager elsewhere.
  - sort_rows: a call with more rows than max_batch_size generates them sorted by prompt length, so that each chunk
    left-pads to a width close to its rows', and returns them in the given order.

Two sources of randomness (rollout.sample_stream):
  - agent (default): `generate(do_sample=True)` draws from the agent's torch stream, one draw per step for the whole
    batch, so a row's sample depends on the rows it is batched with;
  - row: each row draws from its own torch.Generator, seeded from one number the call takes from the agent's stream
    and the row's index (`RowSampler`). A row's sample then does not depend on batching, which is what lets a sharded
    agent split its rows over its ranks and still draw exactly what W = 1 draws (agents.sharding.RankSlicedEngine).

How the agent stream draws (rollout.sampler):
  - multinomial (default): transformers' `torch.multinomial` over the warped probabilities;
  - inverse_cdf: one uniform per row and a search of the cumulative probabilities (`InverseCdfSampler`), the same
    distribution from another use of the stream. On one CPU thread, softmax + `torch.multinomial` over a 151,936-token
    vocabulary cost 6.6 ms per decoding step for 2 rows, the inverse CDF 1.0 ms (side by side). The rehearsal uses it.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence

import numpy as np
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

SAMPLE_STREAMS = ("agent", "row")
SAMPLERS = ("multinomial", "inverse_cdf")
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


def row_seeds(call_seed: int, count: int) -> list[int]:
    """Seed of row r's generator: a SeedSequence of (call_seed, r), independent across rows and calls."""
    return [int(np.random.SeedSequence([call_seed, r]).generate_state(1, dtype=np.uint64)[0]) for r in range(count)]


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


class RowSampler(LogitsProcessor):
    """Draws each row's next token from that row's own torch.Generator.

    The scores go through the warpers `generate(do_sample=True)` applies, in its order (temperature, top-k, top-p),
    to log p up to a constant; then the Gumbel-max trick: argmax_v (log p_v + g_v), g_v = −log(−log u_v),
    u ~ U(0, 1) from the row's generator, is an exact draw from p. The returned scores are 0 for the drawn token and
    −inf elsewhere, so greedy decoding (do_sample=False) takes it. A finished row keeps drawing from its own
    generator, which touches no other row."""

    def __init__(self, seeds: Sequence[int], sampling: SamplingSettings) -> None:
        self.generators = [torch.Generator().manual_seed(seed) for seed in seeds]
        self.warpers = sampling_warpers(sampling)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        log_p = self.warpers(input_ids, scores).double()
        uniform = torch.stack([torch.rand(log_p.shape[1], generator=g, dtype=torch.float64) for g in self.generators])
        tiny = torch.finfo(torch.float64).tiny
        gumbel = -torch.log(-torch.log(uniform.clamp(tiny, 1.0 - 2**-53)))
        drawn = (log_p + gumbel.to(log_p.device)).argmax(dim=-1, keepdim=True)
        return torch.full_like(scores, -torch.inf).scatter_(1, drawn, 0.0)


class InverseCdfSampler(LogitsProcessor):
    """Draws each row's next token by inverse CDF from the torch stream in use (rollout.sampler=inverse_cdf).

    p = softmax(warped scores) in float64, C_v = Σ_{w ≤ v} p_w, one u ~ U(0, 1) per row, and the drawn token is
    min{v : C_v > u · C_V}: an exact draw from p up to float64 rounding, whose only cost beyond the softmax is a
    cumulative sum, where `torch.multinomial` costs ~5 ms per step over 151,936 tokens on a CPU. A token of zero
    probability is never drawn (C does not rise there). Returns 0 for the drawn token and −inf elsewhere, so greedy
    decoding (do_sample=False) takes it; a finished row draws too, as under `torch.multinomial`."""

    def __init__(self, sampling: SamplingSettings) -> None:
        self.warpers = sampling_warpers(sampling)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        cumulative = torch.softmax(self.warpers(input_ids, scores).double(), dim=-1).cumsum(dim=-1)
        uniform = torch.rand((scores.shape[0], 1), dtype=torch.float64, device=scores.device)
        drawn = torch.searchsorted(cumulative, uniform * cumulative[:, -1:], right=True)
        drawn = drawn.clamp_(max=scores.shape[1] - 1)  # u · C_V rounds up to C_V only when u is within 2^-53 of 1
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

    sample_stream: 'agent' or 'row'; sampler: how the agent stream draws, 'multinomial' or 'inverse_cdf' (module
    docstring); generation_dtype, cache, sort_rows: the speed options (module docstring).
    optimizer: the agent's, whose steps make the low-precision copy stale. stop_ids: the ids generation stops at
    and responses are cut at (agents.stops.stop_token_ids); the tokenizer's EOS always among them, first."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_batch_size: int = 256,
        sample_stream: str = "agent",
        sampler: str = "multinomial",
        generation_dtype: torch.dtype | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        cache: str = "dynamic",
        sort_rows: bool = False,
        stop_ids: Sequence[int] = (),
    ):
        if sample_stream not in SAMPLE_STREAMS:
            raise ValueError(f"sample_stream={sample_stream!r} is not one of {SAMPLE_STREAMS}")
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler={sampler!r} is not one of {SAMPLERS}")
        if sampler != "multinomial" and sample_stream != "agent":
            raise ValueError(f"sampler={sampler!r} draws from the agent stream; sample_stream=row draws per row")
        if cache not in CACHES:
            raise ValueError(f"cache={cache!r} is not one of {CACHES}")
        self.model, self.tokenizer, self.max_batch_size = model, tokenizer, max_batch_size
        self.sample_stream, self.sampler, self.cache, self.sort_rows = sample_stream, sampler, cache, sort_rows
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

    def row_seeds(self, count: int, sampling: SamplingSettings) -> list[int] | None:
        """Per-row generator seeds for one call of `count` rows under sample_stream=row: one draw from the torch
        stream in use (the agent's), then `row_seeds`. None when the call does not sample per row (greedy, or
        sample_stream=agent); then nothing is drawn here."""
        if self.sample_stream != "row" or sampling.greedy:
            return None
        return row_seeds(int(torch.randint(0, 2**63 - 1, (1,)).item()), count)

    def generate(self, prompt_ids: Sequence[list[int]], n: int, sampling: SamplingSettings) -> Rollouts:
        """n samples per prompt; rows are grouped by prompt (row r belongs to prompt r // n)."""
        rows = [list(p) for p in prompt_ids for _ in range(n)]
        seeds = self.row_seeds(len(rows), sampling)
        width = max(len(r) for r in rows) if self.sample_stream == "row" else None
        return self.generate_rows(rows, sampling, seeds, width)

    @torch.no_grad()
    def generate_rows(
        self,
        rows: Sequence[list[int]],
        sampling: SamplingSettings,
        seeds: Sequence[int] | None = None,
        width: int | None = None,
    ) -> Rollouts:
        """One response per prompt row, in max_batch_size chunks. seeds: per-row generator seeds (`RowSampler`);
        None samples from the torch stream in use (or decodes greedily). width: left-pad every chunk to it.
        With sort_rows and more than one chunk, the chunks take the rows in order of prompt length."""
        by_inverse_cdf = seeds is None and self.sampler == "inverse_cdf" and not sampling.greedy
        config = self._generation_config(sampling, seeds is not None or by_inverse_cdf)
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
            if seeds is not None:
                drawn = {"logits_processor": LogitsProcessorList([RowSampler([seeds[r] for r in picked], sampling)])}
            elif by_inverse_cdf:
                drawn = {"logits_processor": LogitsProcessorList([InverseCdfSampler(sampling)])}
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
