"""The token ids an agent's rollout stops at, from its tokenizer, its model's generation config and its chat template.

A checkpoint says where its generations end in three places, and they differ between checkpoints of one family:
the tokenizer's eos (Qwen3-*-Base: <|endoftext|>), the generation config's eos_token_id (an int or a list:
Llama-3.2-3B-Instruct's 128001, 128008, 128009), and the chat template, whose assistant turn ends with a special token
(ChatML's <|im_end|>, Llama 3's <|eot_id|>). An agent that prompts with its chat template answers in an assistant turn
and closes it with the template's end of turn; a Base checkpoint's eos is not that token, so a rollout stopping at eos
alone would run on to rollout.max_new_tokens. Both rollout backends stop at every id of `stop_token_ids` and cut the
response at the first one (rollout.hf.split_response).
"""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

USER_PROBE = "What is 1 + 1? Probe 5K8."
ANSWER_PROBE = "The answer is 2. Probe 3W6."
"""A user turn and an assistant turn of known content, rendered to find what the template writes after an answer."""


def template_end_of_turn(tokenizer: PreTrainedTokenizerBase) -> int | None:
    """The id of the special (or added) token the chat template writes right after an assistant turn's content
    (whitespace between them skipped): render [user, assistant] with apply_chat_template, take the text after the
    answer, tokenize it without special tokens, keep its first id. None when the tokenizer has no template, the
    template cannot render the two turns, or what follows the answer does not start with a special or added token."""
    if getattr(tokenizer, "chat_template", None) is None:
        return None
    turns = [{"role": "user", "content": USER_PROBE}, {"role": "assistant", "content": ANSWER_PROBE}]
    try:
        rendered = tokenizer.apply_chat_template(turns, tokenize=False, enable_thinking=False)
    except Exception:  # a template that refuses these turns (jinja's TemplateError, a raise_exception in it)
        return None
    if not isinstance(rendered, str) or ANSWER_PROBE not in rendered:
        return None
    after = rendered.split(ANSWER_PROBE, 1)[1].lstrip()
    first = tokenizer(after, add_special_tokens=False)["input_ids"][:1] if after else []
    special = {*tokenizer.all_special_ids, *tokenizer.added_tokens_decoder}
    return first[0] if first and first[0] in special else None


def stop_token_ids(
    tokenizer: PreTrainedTokenizerBase, generation_eos: int | Sequence[int] | None = None, chat_template: bool = False
) -> tuple[int, ...]:
    """Every id the agent's rollout stops at, in this order, each once: the tokenizer's eos; the model's
    generation_config.eos_token_id (`generation_eos`: an int or a list, None for none); with `chat_template` (the
    agent prompts with it, agents.agent.uses_chat_template), the template's end of turn (`template_end_of_turn`,
    left out when it cannot be found). An agent whose generation config stops at its eos and that prompts in plain
    text stops at its eos alone."""
    if tokenizer.eos_token_id is None:
        raise ValueError("tokenizer has no EOS token; set tokenizer.eos_token")
    extra = [generation_eos] if isinstance(generation_eos, int) else list(generation_eos or [])
    if chat_template:
        extra.append(template_end_of_turn(tokenizer))
    return tuple(dict.fromkeys(int(i) for i in [tokenizer.eos_token_id, *extra] if i is not None))


def generation_eos(model) -> int | list[int] | None:
    """generation_config.eos_token_id of a model (a PEFT or FSDP wrapper passes it through); None when it has none."""
    return getattr(getattr(model, "generation_config", None), "eos_token_id", None)
