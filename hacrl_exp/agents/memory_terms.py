"""The transient bytes of a training step, for the resource planner (agents.memory_plan): what a micro-batch's
forward and backward, a scoring forward and an optimizer step allocate beyond the agent's resident state.

Every term names the tensors it counts. They were checked against the peaks the torch profiler's allocator events
give for one update on CPU (benchmarks.memory_peaks, tests/agents/test_memory_plan.py); symbols: t = b·s tokens of
a micro-batch (b rows of s tokens), n = b·r response tokens, V vocabulary, h hidden, p the compute dtype's bytes,
F = t·V·4 the float32 logits of the whole micro-batch.
"""

from __future__ import annotations

from hacrl_exp.agents.logprobs import chunk_rows
from hacrl_exp.agents.model_shapes import ModelShape

FULL_LOGITS_COPIES = 4
"""The full log-prob path's update peak is 4·F, measured on CPU at 4.0 ± 0.01·F for float32 and bf16 compute
(benchmarks.memory_peaks): the float32 logits kept for the backward; in the backward of gather − logsumexp the
scattered gradient of gather and logsumexp's z − lse and its exp (the bf16 logits of a bf16 model are freed before)."""
FULL_SCORING_COPIES = 2
"""A scoring forward (no gradients) of the full path: the float32 logits and logsumexp's exp(z − max)."""


def layer_activation_bytes(shape: ModelShape, tokens: int, p: int, norm_out: int) -> int:
    """Bytes one decoder layer keeps for its backward over `tokens` tokens (an eager transformers layer, fused
    attention: no a·s² score matrix; no dropout). p: bytes of the compute dtype; norm_out: of a norm's output
    (the weights' dtype: float32 under autocast). Counted tensor by tensor, after Korthikanti et al. 2022 §4.1:

      llama / qwen3: each RMSNorm keeps its float32 input and its output, over 2h (+ q + kv for Qwen3's per-head
        q/k norms): (2h [+ q + kv])·(4 + norm_out); rotary keeps q, k and their rotated halves (2q + 2kv);
        attention its q, k, v and output (2q + 2kv); o_proj its input (q); the SwiGLU MLP gate, up, SiLU output and
        their product (4i): all in p;
      opt / gpt2: (8h + 2i)·p (two LayerNorm inputs, attention q, k, v and output, projections' inputs, GeLU).
    """
    h, q, kv, i = shape.hidden, shape.q_dim, shape.kv_dim, shape.intermediate
    if shape.family != "llama":
        return tokens * (8 * h + 2 * i) * p
    normed = 2 * h + ((q + kv) if shape.qk_norm else 0)
    return tokens * (normed * (4 + norm_out) + (2 * q + 2 * kv + 2 * q + 2 * kv + q + 4 * i) * p)


def logits_bytes(path: str, tokens: int, response_tokens: int, shape: ModelShape, p: int, grad: bool) -> int:
    """Peak bytes of the log-prob computation of one micro-batch.

    full, update: FULL_LOGITS_COPIES·F. full, scoring: FULL_SCORING_COPIES·F, plus the model's p-byte logits when
    p < 4. chunked (c = min(n, chunk rows), C = c·V·4): the forward holds a chunk's float32 logits and logsumexp's
    exp, 2·C (the p-byte chunk is freed once cast); the backward the head's float32 gradient V·h·4 and either a
    chunk's float32 gradient with its p-byte cast (C + c·V·p; C alone at p = 4) or that cast with the chunk's
    product dzᵀh (c·V·p + V·h·p); after the chunks, the head's gradient cast to p (V·h·(4 + p)) and, for a tied
    head at p < 4, the embedding's gradient beside it, accumulated in float32 (V·h·(4 + p) more, measured on CPU);
    the largest of these."""
    vocab, hidden = shape.vocab, shape.hidden
    if path == "full":
        full = tokens * vocab * 4
        low = tokens * vocab * p if p < 4 else 0
        return FULL_LOGITS_COPIES * full if grad else FULL_SCORING_COPIES * full + low
    rows = min(response_tokens, chunk_rows(vocab))
    chunk, cast = rows * vocab * 4, rows * vocab * p
    if not grad:
        return 2 * chunk
    head = vocab * hidden * 4
    backward = head + max(chunk + (cast if p < 4 else 0), cast + vocab * hidden * p)
    head_gradient = vocab * hidden * (4 + p) * (2 if shape.tied and p < 4 else 1)
    return max(2 * chunk, backward, head_gradient)


def unit_buffers(unit_params: int, p: int, offload: bool) -> int:
    """FSDP2's buffers for the largest unit it gathers at once, unit_params parameters: the all-gathered
    parameters (p), their unsharded gradient (p) and its float32 reduce-scatter output (4); with CPU offload also the
    float32 copy of the shard brought from host memory (4)."""
    return unit_params * (p + p + 4 + (4 if offload else 0))


def adamw_temporaries(trainable: int, master_bytes: int, fused: bool) -> int:
    """torch AdamW's step beyond its state: the foreach implementation's sqrt(v) of every trainable weight
    (trainable · master_bytes); none for the fused kernel (CUDA, agents.precision.make_optimizer)."""
    return 0 if fused else trainable * master_bytes
