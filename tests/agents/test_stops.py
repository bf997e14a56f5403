"""An agent's stop ids (agents.stops): its eos, its generation config's, its chat template's end of turn.

The real Qwen3 and Llama 3 tokenizers are tested in tests/rehearsal/test_tokens.py; here, tiny tokenizers with a
template of our own, and the default run's agents, whose stop set must stay their eos alone."""

import pytest
import torch

from hacrl_exp.agents.agent import build_agent
from hacrl_exp.agents.factory import make_agents
from hacrl_exp.agents.stops import stop_token_ids, template_end_of_turn
from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.config.schema import AgentConfig
from hacrl_exp.tasks import build_task
from hacrl_exp.trainer.validate import preflight

ALPHABET = "0123456789+=,|abcdefghijklmnopqrstuvwxyz: \n"
TURNS = "{% for m in messages %}{{ m['role'] }}:{{ m['content'] }}"


def templated(ending: str):
    """A char tokenizer with a template that writes `ending` after each turn, and an added special token <end>."""
    tokenizer = build_tokenizer("char", ALPHABET)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<end>"]})
    tokenizer.chat_template = TURNS + ending + "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
    return tokenizer


def test_the_end_of_turn_is_the_special_token_right_after_the_answer():
    tokenizer = templated("\n<end>\n")  # whitespace before it is skipped
    end = tokenizer.convert_tokens_to_ids("<end>")
    assert template_end_of_turn(tokenizer) == end
    eos = tokenizer.eos_token_id
    assert stop_token_ids(tokenizer, None, chat_template=True) == (eos, end)
    assert stop_token_ids(tokenizer, [end, eos, 7], chat_template=True) == (eos, end, 7)  # eos first, each once
    assert stop_token_ids(tokenizer, 7, chat_template=False) == (eos, 7)  # plain prompts: no end of turn
    assert stop_token_ids(tokenizer, eos, chat_template=False) == (eos,)


@pytest.mark.parametrize("ending", ["\n", "", "{{ raise_exception('no assistant turns') }}"])
def test_no_end_of_turn_when_the_template_writes_none(ending):
    """Plain text after the answer, nothing, or a template that refuses the turns: none found, eos alone stops."""
    tokenizer = templated(ending)
    assert template_end_of_turn(tokenizer) is None
    assert stop_token_ids(tokenizer, None, chat_template=True) == (tokenizer.eos_token_id,)
    assert template_end_of_turn(build_tokenizer("char", ALPHABET)) is None  # no template at all


def test_an_agent_that_prompts_with_its_template_stops_at_its_end_of_turn():
    tokenizer = templated("<end>")
    model = build_tiny_model("opt", tokenizer, 32, 1, 4)
    args = dict(device=torch.device("cpu"), kl_coef=0.0, max_prompt_tokens=16, max_batch_size=4)
    agent = build_agent("a", AgentConfig(chat_template=True), model, tokenizer, **args)
    end = tokenizer.convert_tokens_to_ids("<end>")
    assert agent.use_chat_template and agent.stop_ids == (tokenizer.eos_token_id, end)
    plain = build_agent("b", AgentConfig(chat_template=False), model, tokenizer, **args)
    assert plain.stop_ids == (tokenizer.eos_token_id,)


def test_the_default_runs_agents_stop_at_their_eos_alone(tmp_path):
    """The tiny agents of `python -m hacrl_exp.run` (warm start off: it changes neither tokenizer nor generation
    config): plain prompts, generation config eos = tokenizer eos, so their rollouts are what they were."""
    no_warm_start = [f"agents.members.{name}.warm_start.steps=0" for name in ("opt_char", "gpt2_bpe")]
    config = preflight([*no_warm_start, f"trainer.cache_dir={tmp_path}"])
    agents = make_agents(config, build_task(config.task), device=torch.device("cpu"))
    assert [a.name for a in agents] == ["opt_char", "gpt2_bpe"]
    for agent in agents:
        assert not agent.use_chat_template
        assert agent.model.generation_config.eos_token_id == agent.tokenizer.eos_token_id
        assert agent.stop_ids == agent.engine.stop_ids == (agent.tokenizer.eos_token_id,)
