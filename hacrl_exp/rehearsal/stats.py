"""The numbers a rehearsal reports from the tokenizers alone: prompt lengths against the prompt limit, gold-solution
lengths against max_new_tokens, and how exactly a response survives re-tokenisation between two agents.

Prompts are rendered by `agents.agent.prompt_token_ids`, the call the run makes (chat template or plain), untruncated;
a re-tokenised response goes through `trainer.step.retokenize`, the run's exchange (spec §1.3, C1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hacrl_exp.agents.agent import prompt_token_ids
from hacrl_exp.trainer.step import retokenize

PERCENTILES = (50, 90, 99)
CHUNK = 2000
"""Prompts rendered per batched call (bounds the memory of one call)."""


@dataclass(frozen=True)
class Lengths:
    """Token lengths of one set of texts under one agent's tokenizer."""

    name: str
    lengths: np.ndarray

    def percentiles(self) -> list[int]:
        return [int(np.percentile(self.lengths, q)) for q in PERCENTILES] if len(self.lengths) else [0] * 3

    def over(self, limit: int) -> float:
        """Share of the texts longer than `limit` tokens (the run cuts them)."""
        return float((self.lengths > limit).mean()) if len(self.lengths) else 0.0

    @property
    def longest(self) -> int:
        return int(self.lengths.max()) if len(self.lengths) else 0


def prompt_lengths(name: str, tokenizer, texts: Sequence[str], chat_template: bool) -> Lengths:
    """The untruncated prompt length of each text as the agent renders it."""
    sizes = []
    for start in range(0, len(texts), CHUNK):
        sizes += [len(ids) for ids in prompt_token_ids(tokenizer, texts[start : start + CHUNK], chat_template)]
    return Lengths(name, np.asarray(sizes, dtype=np.int64))


def text_lengths(name: str, tokenizer, texts: Sequence[str]) -> Lengths:
    """Each text's token count without special tokens (a response's length)."""
    ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"] if texts else []
    return Lengths(name, np.asarray([len(row) for row in ids], dtype=np.int64))


@dataclass
class RoundTrip:
    """Texts sent from a source agent to a learner: source tokens → source text → learner tokens → learner text."""

    source: str
    learner: str
    exact: int
    total: int
    mean_ratio: float
    """Mean of (learner tokens / source tokens) over the texts, uncut."""
    failures: list[tuple[int, str]] = field(default_factory=list)
    """(row, reason) of each text that does not come back exactly (the tokenizers, not the length limit)."""
    cut: int = 0
    """Texts longer than max_response_tokens in the learner's tokens: the run's exchange keeps their first tokens."""

    @property
    def rate(self) -> float:
        return self.exact / self.total if self.total else 1.0


def round_trip(
    source: str, learner: str, src_tok, dst_tok, texts: Sequence[str], max_response_tokens: int
) -> RoundTrip:
    """Each text as the source would generate it (its tokens), decoded as the source shares it (skip special tokens),
    re-tokenised for the learner (trainer.step.retokenize, uncut) and decoded by the learner: exact when the learner's
    text is the original. Cut counts the texts the exchange would cut at max_response_tokens learner tokens."""
    src_ids = src_tok(list(texts), add_special_tokens=False)["input_ids"]
    shared = src_tok.batch_decode(src_ids, skip_special_tokens=True)
    dst_ids = retokenize(shared, dst_tok, UNCUT)
    back = dst_tok.batch_decode(dst_ids, skip_special_tokens=True)
    failures = [
        (row, _reason(text, sent, got, source, learner))
        for row, (text, sent, got) in enumerate(zip(texts, shared, back))
        if got != text
    ]
    ratios = [len(d) / max(len(s), 1) for s, d in zip(src_ids, dst_ids)]
    cut = sum(len(d) > max_response_tokens for d in dst_ids)
    return RoundTrip(source, learner, len(texts) - len(failures), len(texts), float(np.mean(ratios)), failures, cut)


UNCUT = 1 << 30
"""A length limit no text reaches: the round trip compares whole texts; cuts are counted apart."""


def _reason(text: str, sent: str, got: str, source: str, learner: str) -> str:
    where, seen = (f"{source}'s own decoding", sent) if sent != text else (f"{learner}'s decoding", got)
    at = next((i for i, (a, b) in enumerate(zip(text, seen)) if a != b), min(len(text), len(seen)))
    return f"{where} changes it at character {at}: {text[at : at + 20]!r} → {seen[at : at + 20]!r}"
