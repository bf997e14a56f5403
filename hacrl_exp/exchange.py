"""Re-tokenise a source agent's responses for a learner with another tokenizer (spec §1.3, C1 convention).

The source's text (decoded with skip_special_tokens=True, trailing EOS already removed by the rollout)
is encoded with the learner's tokenizer, add_special_tokens=False, right-truncated. An empty result
becomes one learner EOS, as C1 keeps one target EOS for an EOS-only response. Prompts are rendered
by each learner itself, so the learner's chat template applies.
"""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase


def retokenize(texts: Sequence[str], tokenizer: PreTrainedTokenizerBase, max_response_tokens: int) -> list[list[int]]:
    """Token ids of each text in the learner's tokenizer: encode(text)[:max_response_tokens] or [eos]."""
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"] if texts else []
    return [ids[:max_response_tokens] or [tokenizer.eos_token_id] for ids in encoded]
