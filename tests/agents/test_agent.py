"""Agent wrapping: bad tokenizers are rejected with the key named; prompts render as plain text or chat."""

import pytest
import torch

from hacrl_exp.agents.agent import build_agent
from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.config.schema import AgentConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.tasks.arithmetic import ArithmeticTask

TASK = ArithmeticTask(tiers=["add2"])


def make(tokenizer, **kwargs):
    model = build_tiny_model("opt", tokenizer, 32, 1, 4)
    args = dict(device=torch.device("cpu"), kl_coef=0.0, max_prompt_tokens=8, max_batch_size=16)
    return build_agent("opt_char", AgentConfig(**kwargs), model, tokenizer, **args)


def test_tokenizer_without_eos_is_a_config_error():
    tokenizer = build_tokenizer("char", TASK.alphabet)
    model = build_tiny_model("opt", tokenizer, 32, 1, 4)
    tokenizer.eos_token = None
    with pytest.raises(ConfigError, match="agents.members.opt_char.tokenizer has no EOS token"):
        build_agent(
            "opt_char",
            AgentConfig(),
            model,
            tokenizer,
            device=torch.device("cpu"),
            kl_coef=0.0,
            max_prompt_tokens=8,
            max_batch_size=16,
        )


def test_plain_prompt_is_left_truncated_and_frozen_agent_has_no_optimizer():
    tokenizer = build_tokenizer("char", TASK.alphabet)
    agent = make(tokenizer, frozen=True)
    ids = agent.prompt_ids("1234567+891011=")
    assert tokenizer.decode(ids) == "+891011="
    assert agent.frozen and agent.optimizer is None
    assert not any(p.requires_grad for p in agent.model.parameters())


def test_chat_template_renders_when_present():
    tokenizer = build_tokenizer("char", TASK.alphabet + "abcdefghijklmnopqrstuvwxyz:")
    tokenizer.chat_template = "{% for m in messages %}user:{{ m['content'] }}{% endfor %}assistant:"
    agent = make(tokenizer, chat_template=True)
    agent.max_prompt_tokens = 64
    assert tokenizer.decode(agent.prompt_ids("1+2=")) == "user:1+2=assistant:"
    plain = make(tokenizer, chat_template=False)
    assert tokenizer.decode(plain.prompt_ids("1+2=")) == "1+2="
