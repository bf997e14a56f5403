"""Per-token log-probs of responses under a causal LM (spec §1.2, §1.4).

Sequences are right-padded so every model family sees natural positions 0..L−1, the same positions
that left-padded generation assigns through its attention mask. Logits are divided by the sampling temperature
before the softmax, as verl scores old and current log-probs, so that the ratio compares the distributions the
responses were sampled from (a no-op at T = 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedModel

from hacrl_exp.rollout.base import compute_device


def response_logprobs(
    model: PreTrainedModel,
    prompt_ids: Sequence[list[int]],
    response_ids: Sequence[list[int]],
    pad_id: int,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """log π(y_t | x, y_<t) for every response token. Returns (logp (B, T), mask (B, T)), T = longest response.

    logp_t = z[y_t] − logsumexp(z), z = logits / T, at the position before y_t; gradients flow when enabled.
    """
    device = compute_device(model)
    lengths = [len(p) + len(r) for p, r in zip(prompt_ids, response_ids)]
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(lengths), width), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        ids[i, : lengths[i]] = torch.tensor(list(p) + list(r))
        attention[i, : lengths[i]] = 1
    ids, attention = ids.to(device), attention.to(device)
    logits = model(input_ids=ids, attention_mask=attention, use_cache=False).logits[:, :-1].float()
    if temperature > 0 and temperature != 1.0:  # skipped at 1 (bit-identical runs) and 0 (greedy: no distribution)
        logits = logits / temperature
    targets = ids[:, 1:]
    token_logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logits.logsumexp(-1)

    resp_len = torch.tensor([len(r) for r in response_ids], device=device)
    prompt_len = torch.tensor([len(p) for p in prompt_ids], device=device)
    steps = torch.arange(int(resp_len.max()), device=device)
    # the logit at position prompt_len−1+t predicts response token t
    index = (prompt_len.unsqueeze(1) - 1 + steps.unsqueeze(0)).clamp(max=token_logp.shape[1] - 1)
    mask = steps.unsqueeze(0) < resp_len.unsqueeze(1)
    return token_logp.gather(1, index) * mask, mask


@torch.no_grad()
def batched_response_logprobs(
    model: PreTrainedModel,
    prompt_ids: Sequence[list[int]],
    response_ids: Sequence[list[int]],
    pad_id: int,
    batch_size: int,
    temperature: float = 1.0,
) -> list[torch.Tensor]:
    """`response_logprobs` without gradients, in chunks; returns one 1-D tensor (|y|,) per row, on CPU."""
    out: list[torch.Tensor] = []
    was_training = model.training
    model.eval()
    for start in range(0, len(prompt_ids), batch_size):
        stop = start + batch_size
        logp, mask = response_logprobs(model, prompt_ids[start:stop], response_ids[start:stop], pad_id, temperature)
        out.extend(row[m].cpu() for row, m in zip(logp, mask))
    model.train(was_training)
    return out
