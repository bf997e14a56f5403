"""Per-token log-probs of responses under a causal LM (spec §1.2, §1.4).

Sequences are right-padded so every model family sees natural positions 0..L−1, the same positions
that left-padded generation assigns through its attention mask. Logits are divided by the sampling temperature
before the softmax, as verl scores old and current log-probs, so that the ratio compares the distributions the
responses were sampled from (a no-op at T = 1).

Two ways to the same numbers (tests/agents/test_logprobs.py: equal within 1e-6 in float32, gradients included):
  - full: the model's logits at every position, (B, L, V), cast to float32, then gather − logsumexp. Simple, and
    what the tiny CPU agents run (their logits are a few MiB), so the default run's digits stay as they were.
  - chunked: the model's last hidden states, only at the response positions (N = Σ|y| rows, no prompt positions),
    projected by the output head and log-softmaxed `CHUNK_BYTES` of float32 logits at a time
    (`ChunkedTokenLogprobs`); the backward recomputes each chunk's logits instead of keeping them, so no tensor of
    the whole micro-batch's logits ever exists (the fused linear + cross-entropy of Liger kernels, in plain torch).
`logprob_path` picks: chunked on CUDA and wherever the micro-batch's float32 logits would reach `AUTO_BYTES`,
for the families whose head is a plain bias-free Linear applied to the last hidden state (`CHUNKED_FAMILIES`).
`forced_path` makes every 'auto' pass of a block take one path (and chunk size): how the benchmarks measure one path
through the trainer's own scoring and update, which ask for 'auto'.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch

from hacrl_exp.rollout.base import compute_device

if TYPE_CHECKING:
    from transformers import PreTrainedModel

CHUNKED_FAMILIES = frozenset({"llama", "qwen2", "qwen3", "mistral", "opt", "gpt2"})
"""model_type whose CausalLM forward ends in `lm_head(hidden_states)` (no soft-capping or logit scale)."""
CHUNK_BYTES = 256 * 2**20
"""float32 logits per chunk of the chunked path (the planner's chunk term, agents.memory_plan)."""
AUTO_BYTES = 256 * 2**20
"""The chunked path engages off CUDA from this many bytes of a micro-batch's float32 logits (B·L·V·4)."""
PATHS = ("auto", "full", "chunked")
_forced: dict[str, Any] = {}
"""'path' and 'chunk_bytes' while a `forced_path` block runs; empty otherwise."""


@contextmanager
def forced_path(path: str, chunk_bytes: int | None = None) -> Iterator[None]:
    """Within the block, every log-prob pass of this process that asks for 'auto' takes `path` ('full' or
    'chunked'), and the chunked path (with the planner's chunk term, `chunk_rows`) cuts `chunk_bytes` of float32
    logits per chunk instead of CHUNK_BYTES. For measurements (benchmarks.memory_peaks, benchmarks.before_after);
    one block at a time per process, not per thread."""
    if path not in PATHS:
        raise ValueError(f"logprob path {path!r} is not one of {PATHS}")
    before = dict(_forced)
    _forced.update(path=path, chunk_bytes=chunk_bytes)
    try:
        yield
    finally:
        _forced.clear()
        _forced.update(before)


def chunk_rows(vocab: int) -> int:
    """Rows (response tokens) per chunk: CHUNK_BYTES (or `forced_path`'s chunk_bytes) of float32 logits, at least 1."""
    return max(1, (_forced.get("chunk_bytes") or CHUNK_BYTES) // (4 * vocab))


def output_head(model: torch.nn.Module) -> torch.nn.Linear | None:
    """The model's output projection when the chunked path can replace it, else None."""
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) not in CHUNKED_FAMILIES:
        return None
    head = model.get_output_embeddings()
    if type(head) is not torch.nn.Linear or head.bias is not None:  # e.g. a LoRA-wrapped head: full path
        return None
    return head


def logprob_path(model: torch.nn.Module, rows: int, width: int, path: str = "auto") -> str:
    """'chunked' or 'full' for a micro-batch of `rows` sequences of `width` tokens (module docstring)."""
    if path not in PATHS:
        raise ValueError(f"logprob path {path!r} is not one of {PATHS}")
    if path == "auto":
        path = _forced.get("path", "auto")
    head = output_head(model)
    if path == "full" or head is None:
        return "full"
    if path == "chunked" or compute_device(model).type == "cuda":
        return "chunked"
    return "chunked" if rows * width * head.out_features * 4 >= AUTO_BYTES else "full"


def _chunk_logits(hidden: torch.Tensor, weight: torch.Tensor, temperature: float) -> torch.Tensor:
    """float32 logits z / T of one chunk (the matmul in the hidden states' dtype, as the model's head computes)."""
    logits = torch.nn.functional.linear(hidden, weight).float()
    if temperature > 0 and temperature != 1.0:
        logits.div_(temperature)
    return logits


class ChunkedTokenLogprobs(torch.autograd.Function):
    """log softmax(h Wᵀ / T)[y] for N rows, `chunk` rows of logits at a time; backward recomputes each chunk.

    Forward: z = h_c Wᵀ / T (float32), lse = logsumexp(z), out = z[y] − lse; keeps h, W, y and lse (N floats).
    Backward, per chunk: ∂out/∂z = onehot(y) − softmax(z), so dz = (g·onehot(y) − g·exp(z − lse)) / T,
    ∂h = dz W and ∂W = Σ dzᵀ h (accumulated in float32)."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature: float, chunk: int):
        out = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        lse = torch.empty_like(out)
        for start in range(0, hidden.shape[0], chunk):
            stop = start + chunk
            logits = _chunk_logits(hidden[start:stop], weight, temperature)
            lse[start:stop] = torch.logsumexp(logits, dim=-1)
            out[start:stop] = logits.gather(1, targets[start:stop, None]).squeeze(1) - lse[start:stop]
            del logits
        ctx.save_for_backward(hidden, weight, targets, lse)
        ctx.temperature, ctx.chunk = temperature, chunk
        return out

    @staticmethod
    def backward(ctx, grad):
        hidden, weight, targets, lse = ctx.saved_tensors
        scale = ctx.temperature if ctx.temperature > 0 and ctx.temperature != 1.0 else 1.0
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        grad = grad.float()
        for start in range(0, hidden.shape[0], ctx.chunk):
            stop = start + ctx.chunk
            g = grad[start:stop, None]
            dz = _chunk_logits(hidden[start:stop], weight, ctx.temperature)
            dz.sub_(lse[start:stop, None]).exp_().mul_(-g)  # −g·softmax(z)
            dz.scatter_add_(1, targets[start:stop, None], g)  # + g·onehot(y)
            if scale != 1.0:
                dz.div_(scale)
            dz = dz.to(hidden.dtype)
            if grad_hidden is not None:
                grad_hidden[start:stop] = dz @ weight
            if ctx.needs_input_grad[1]:
                grad_weight.add_(dz.t() @ hidden[start:stop])
            del dz
        grad_weight = grad_weight.to(weight.dtype) if ctx.needs_input_grad[1] else None
        return grad_hidden, grad_weight, None, None, None


def chunked_token_logprobs(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """(N,) float32 log-probs of `targets` under the head `weight` applied to `hidden` (N, h), in chunks.

    Under autocast the matmuls run in the autocast dtype, as the model's own head would (bf16 logits, then float32)."""
    device_type = hidden.device.type
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        hidden, weight = hidden.to(dtype), weight.to(dtype)
    elif weight.dtype != hidden.dtype:
        hidden = hidden.to(weight.dtype)
    with torch.autocast(device_type, enabled=False):
        return ChunkedTokenLogprobs.apply(hidden, weight, targets, temperature, chunk_rows(weight.shape[0]))


@contextmanager
def _head_scores(head: torch.nn.Linear, rows, positions, targets, temperature: float) -> Iterator[None]:
    """Within the block, `head(hidden)` returns the (N,) log-probs of `targets` at (rows, positions) instead of
    logits: computed inside the model's forward, where a sharded root's head weight is gathered (FSDP2 then
    re-gathers it for the backward, as for any output of the root)."""

    def forward(hidden: torch.Tensor) -> torch.Tensor:
        return chunked_token_logprobs(hidden[rows, positions], head.weight, targets, temperature)

    head.forward = forward
    try:
        yield
    finally:
        del head.forward


def _right_padded(
    prompt_ids: Sequence[list[int]], response_ids: Sequence[list[int]], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = [len(p) + len(r) for p, r in zip(prompt_ids, response_ids)]
    ids = torch.full((len(lengths), max(lengths)), pad_id, dtype=torch.long)
    attention = torch.zeros((len(lengths), max(lengths)), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        ids[i, : lengths[i]] = torch.tensor(list(p) + list(r))
        attention[i, : lengths[i]] = 1
    return ids.to(device), attention.to(device)


def response_logprobs(
    model: PreTrainedModel,
    prompt_ids: Sequence[list[int]],
    response_ids: Sequence[list[int]],
    pad_id: int,
    temperature: float = 1.0,
    path: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """log π(y_t | x, y_<t) for every response token. Returns (logp (B, T), mask (B, T)), T = longest response.

    logp_t = z[y_t] − logsumexp(z), z = logits / T, at the position before y_t; gradients flow when enabled.
    path: 'auto' (`logprob_path`), 'full' or 'chunked' (module docstring); the same numbers either way."""
    device = compute_device(model)
    ids, attention = _right_padded(prompt_ids, response_ids, pad_id, device)
    resp_len = torch.tensor([len(r) for r in response_ids], device=device)
    prompt_len = torch.tensor([len(p) for p in prompt_ids], device=device)
    steps = torch.arange(int(resp_len.max()), device=device)
    mask = steps.unsqueeze(0) < resp_len.unsqueeze(1)
    # the logit at position prompt_len−1+t predicts response token t
    position = prompt_len.unsqueeze(1) - 1 + steps.unsqueeze(0)
    if logprob_path(model, *ids.shape, path) == "chunked":
        rows = torch.arange(len(ids), device=device).unsqueeze(1).expand_as(mask)[mask]
        positions = position[mask]
        with _head_scores(output_head(model), rows, positions, ids[rows, positions + 1], temperature):
            scores = model(input_ids=ids, attention_mask=attention, use_cache=False).logits
        return torch.zeros(mask.shape, dtype=scores.dtype, device=device).masked_scatter(mask, scores), mask
    logits = model(input_ids=ids, attention_mask=attention, use_cache=False).logits[:, :-1].float()
    if temperature > 0 and temperature != 1.0:  # skipped at 1 (bit-identical runs) and 0 (greedy: no distribution)
        logits = logits / temperature
    targets = ids[:, 1:]
    token_logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logits.logsumexp(-1)
    index = position.clamp(max=token_logp.shape[1] - 1)
    return token_logp.gather(1, index) * mask, mask


@torch.no_grad()
def batched_response_logprobs(
    model: PreTrainedModel,
    prompt_ids: Sequence[list[int]],
    response_ids: Sequence[list[int]],
    pad_id: int,
    batch_size: int,
    temperature: float = 1.0,
    path: str = "auto",
) -> list[torch.Tensor]:
    """`response_logprobs` without gradients, in chunks; returns one 1-D tensor (|y|,) per row, on CPU."""
    out: list[torch.Tensor] = []
    was_training = model.training
    model.eval()
    for start in range(0, len(prompt_ids), batch_size):
        stop = start + batch_size
        logp, mask = response_logprobs(
            model, prompt_ids[start:stop], response_ids[start:stop], pad_id, temperature, path
        )
        out.extend(row[m].cpu() for row, m in zip(logp, mask))
    model.train(was_training)
    return out
