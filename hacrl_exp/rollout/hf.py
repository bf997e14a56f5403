"""transformers `generate` rollout backend: batched, left-padded, KV-cached sampling."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from hacrl_exp.faults import crash_point
from hacrl_exp.rollout.base import Rollouts, SamplingSettings


def left_pad(rows: Sequence[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack token lists into (B, L) ids and attention mask, padded on the left for generation."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.tensor(row)
            mask[i, width - len(row) :] = 1
    return ids.to(device), mask.to(device)


def split_response(tokens: list[int], eos_id: int, pad_id: int) -> tuple[list[int], bool]:
    """Cut a generated continuation at its first EOS. Returns (ids without the EOS, finished).

    An EOS-only response keeps one EOS so that it still has a token to score (spec §1.3, C1).
    """
    if eos_id in tokens:
        cut = tokens.index(eos_id)
        return (tokens[:cut] or [eos_id]), True
    while tokens and tokens[-1] == pad_id and pad_id != eos_id:
        tokens = tokens[:-1]
    return tokens, False


class HFRolloutEngine:
    """Samples with the agent's own (training) model through `model.generate`."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, max_batch_size: int = 256):
        if tokenizer.eos_token_id is None:
            raise ValueError("tokenizer has no EOS token; set tokenizer.eos_token")
        self.model, self.tokenizer, self.max_batch_size = model, tokenizer, max_batch_size
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def _generation_config(self, sampling: SamplingSettings) -> GenerationConfig:
        greedy = not sampling.do_sample or sampling.temperature == 0
        kwargs = dict(
            max_new_tokens=sampling.max_new_tokens,
            eos_token_id=self.tokenizer.eos_token_id,
            pad_token_id=self.pad_id,
            do_sample=not greedy,
        )
        if not greedy:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=max(sampling.top_k, 0))
        return GenerationConfig(**kwargs)

    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[list[int]], n: int, sampling: SamplingSettings) -> Rollouts:
        """n samples per prompt; rows are grouped by prompt (row r belongs to prompt r // n)."""
        rows = [list(p) for p in prompt_ids for _ in range(n)]
        config = self._generation_config(sampling)
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        responses, finished = [], []
        for start in range(0, len(rows), self.max_batch_size):
            chunk = rows[start : start + self.max_batch_size]
            ids, mask = left_pad(chunk, self.pad_id, device)
            out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
            crash_point("generate")  # fault-injection hook (hacrl_exp.faults); a no-op unless HACRL_CRASH_AT is set
            for continuation in out[:, ids.shape[1] :].tolist():
                tokens, done = split_response(continuation, self.tokenizer.eos_token_id, self.pad_id)
                responses.append(tokens)
                finished.append(done)
        self.model.train(was_training)
        texts = self.tokenizer.batch_decode(responses, skip_special_tokens=True)
        return Rollouts(prompt_ids=rows, response_ids=responses, texts=texts, finished=finished)
