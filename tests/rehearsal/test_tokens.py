"""The real tokenizers of the paper's pairs: re-tokenisation between families, and where each checkpoint stops."""

from __future__ import annotations

import json

import pytest
import torch

from hacrl_exp.agents.agent import build_agent, load_pretrained, prompt_token_ids
from hacrl_exp.agents.stops import stop_token_ids, template_end_of_turn
from hacrl_exp.config.schema import AgentConfig, ModelConfig, RehearsalConfig, TokenizerConfig
from hacrl_exp.rehearsal.models import save_stand_in
from hacrl_exp.rehearsal.sources import resolve_agent, write_tokenizer
from hacrl_exp.rehearsal.stats import round_trip
from hacrl_exp.rollout.base import SamplingSettings

QWEN_BASE, QWEN_INSTRUCT, LLAMA = (
    "Qwen/Qwen3-4B-Base",
    "Qwen/Qwen3-4B-Instruct-2507",
    "meta-llama/Llama-3.2-3B-Instruct",
)


def test_qwen3_and_llama3_round_trip_every_math500_gold_solution(checkpoint_tokenizer, data_dir):
    """Qwen3 → Llama 3 and back through the run's exchange (decode, trainer.step.retokenize, decode): exact on all
    500 gold solutions (LaTeX, [asy] code); a row that is not would be listed with its reason."""
    golds = [json.loads(line)["solution"] for line in (data_dir / "math500.jsonl").read_text().splitlines()]
    qwen, llama = checkpoint_tokenizer(QWEN_BASE)[1], checkpoint_tokenizer(LLAMA)[1]
    assert len(golds) == 500 and sum("\\frac" in g for g in golds) > 100
    for source, learner, src, dst in (("qwen", "llama", qwen, llama), ("llama", "qwen", llama, qwen)):
        trip = round_trip(source, learner, src, dst, golds, 4096)
        assert trip.exact == trip.total == 500, trip.failures[:10]
        assert 0.9 < trip.mean_ratio < 1.1  # two byte-level BPEs of similar size: about one token for one


def test_round_trip_of_what_responses_hold_and_the_rows_that_change(checkpoint_tokenizer):
    """Unicode, <think> tags, odd whitespace survive both ways. A text that spells the other family's special token
    is re-tokenised as that token (as verl's C1 exchange does) and decoded away: listed with its reason. A text longer
    than the response limit in the learner's tokens is counted as cut, apart from exactness."""
    qwen, llama = checkpoint_tokenizer(QWEN_BASE)[1], checkpoint_tokenizer(LLAMA)[1]
    texts = [
        "<think>\nLet me see…\n</think>\n\nSo $\\boxed{2}$",
        "ünïcödé ∑ π ≤ 你好 😀 ∞",
        "tabs\tand  two  spaces\n\n\n",
        " leading",
        "x\r\ny",
        "a <|im_end|> b",
        "a long answer " * 20,
    ]
    trip = round_trip("llama", "qwen", llama, qwen, texts, 32)
    assert trip.exact == 6 and [row for row, _ in trip.failures] == [5], trip.failures
    assert "qwen's decoding changes it" in trip.failures[0][1] and "'<|im_end|> b' → ' b'" in trip.failures[0][1]
    assert trip.cut == 1  # "a long answer " × 20: 60 Qwen tokens > 32
    back = round_trip("qwen", "llama", qwen, llama, texts[:5], 32)
    assert back.exact == 5 and back.cut == 0, back.failures


def test_the_chat_template_path_batches_what_one_prompt_renders(checkpoint_tokenizer):
    """The statistics render thousands of prompts in one call; each is the ids the agent sends alone."""
    tok = checkpoint_tokenizer(LLAMA)[1]
    texts = ["What is $1 + 1$?", "Find $\\sqrt{2}$ to 3 places. Let's think", "ünïcödé ∑ 你好"]
    batched = prompt_token_ids(tok, texts, True)
    assert batched == [prompt_token_ids(tok, [t], True)[0] for t in texts]
    assert batched[0][0] == tok.bos_token_id and tok.decode(batched[0]).endswith("<|end_header_id|>\n\n")


def stand_in_agent(checkpoint_tokenizer, checkpoint: str, folder):
    """A random stand-in of `checkpoint` built as the run builds an agent (load_pretrained, build_agent)."""
    source, tokenizer = checkpoint_tokenizer(checkpoint)
    write_tokenizer(source, folder)
    save_stand_in(source, tokenizer, RehearsalConfig(hidden_size=16, num_layers=1), 0, folder)
    cfg = AgentConfig(model=ModelConfig(source="pretrained", path=str(folder)), tokenizer=TokenizerConfig("pretrained"))
    model, tokenizer = load_pretrained("agent", cfg)
    return build_agent(
        "agent", cfg, model, tokenizer, device=torch.device("cpu"), kl_coef=0.0, max_prompt_tokens=64, max_batch_size=4
    )


def forced(agent, token: str, max_new_tokens: int = 5, after: str | None = None, steps: int = 0):
    """Greedy generation with the output layer biased so that the random model emits `token` at every step (with
    `after`: emits `after` for the first `steps` tokens, then `token`)."""
    token_id = agent.tokenizer.convert_tokens_to_ids(token)
    calls = []

    def bias(module, args, out):
        chosen = token_id if after is None or len(calls) >= steps else agent.tokenizer.convert_tokens_to_ids(after)
        calls.append(chosen)  # one forward per generated token (the prompt's forward gives the first)
        return out + torch.nn.functional.one_hot(torch.tensor(chosen), out.shape[-1]).to(out.dtype) * 1e4

    hook = agent.model.lm_head.register_forward_hook(bias)
    try:
        prompt = agent.prompt_ids("What is $1 + 1$?")
        out = agent.engine.generate([prompt], 1, SamplingSettings(temperature=0.0, max_new_tokens=max_new_tokens))
    finally:
        hook.remove()
    return token_id, out.response_ids[0], out.finished[0]


@pytest.mark.parametrize(
    "checkpoint, eos, stops, not_a_stop",
    [
        # Base: eos <|endoftext|>, but it prompts with ChatML, whose turns end with <|im_end|>: it stops at both
        (QWEN_BASE, "<|endoftext|>", (151643, 151645), "<|im_start|>"),  # <|endoftext|>, <|im_end|>
        (QWEN_INSTRUCT, "<|im_end|>", (151645, 151643), "<|im_start|>"),
        # its eos and end of turn <|eot_id|>, and its generation_config's <|end_of_text|>, <|eom_id|> (128008: a
        # reserved token in the Llama 3 family file the rehearsal uses)
        (LLAMA, "<|eot_id|>", (128009, 128001, 128008), "<|start_header_id|>"),
    ],
)
def test_each_checkpoint_stops_at_its_own_stop_tokens(checkpoint_tokenizer, tmp_path, checkpoint, eos, stops,
                                                      not_a_stop):  # fmt: skip
    """Base and Instruct checkpoints of one family share a vocabulary but not eos: a random model built as the run
    builds it and forced to emit any of the checkpoint's stop tokens stops at once; forced to emit another special
    token, it runs to max_new_tokens."""
    agent = stand_in_agent(checkpoint_tokenizer, checkpoint, tmp_path)
    assert agent.tokenizer.eos_token == eos and agent.use_chat_template
    assert agent.stop_ids == stops
    for stop in stops:
        stop_id, response, finished = forced(agent, agent.tokenizer.convert_ids_to_tokens(stop))
        assert finished and response == [stop_id]  # a stop-only response keeps its stop token to score (spec §1.3)
    other_id, response, finished = forced(agent, not_a_stop)
    assert not finished and response == [other_id] * 5


@pytest.mark.parametrize("checkpoint, end", [(QWEN_BASE, "<|im_end|>"), (LLAMA, "<|eot_id|>")])
def test_an_answer_that_ends_its_turn_is_cut_there(checkpoint_tokenizer, tmp_path, checkpoint, end):
    """Three tokens of answer, then the template's end of turn: the response is the three tokens, finished; the
    end of turn is found from the template itself (agents.stops.template_end_of_turn)."""
    agent = stand_in_agent(checkpoint_tokenizer, checkpoint, tmp_path)
    assert template_end_of_turn(agent.tokenizer) == agent.tokenizer.convert_tokens_to_ids(end)
    word = agent.tokenizer.convert_ids_to_tokens(agent.tokenizer("four", add_special_tokens=False)["input_ids"][0])
    _, response, finished = forced(agent, end, max_new_tokens=8, after=word, steps=3)
    assert finished and agent.tokenizer.convert_ids_to_tokens(response) == [word] * 3


def test_stop_ids_follow_the_prompt_format(checkpoint_tokenizer):
    """Qwen3-Base prompting in plain text stops at its eos alone (its generation_config's is the same id); under
    ChatML, at <|im_end|> too. Llama 3 Instruct: its generation_config's three ids, <|eot_id|> first (its eos)."""
    source, qwen = checkpoint_tokenizer(QWEN_BASE)
    assert stop_token_ids(qwen, list(source.stops), chat_template=False) == (151643,)
    assert stop_token_ids(qwen, list(source.stops), chat_template=True) == (151643, 151645)
    source, llama = checkpoint_tokenizer(LLAMA)
    assert stop_token_ids(llama, list(source.stops), chat_template=True) == (128009, 128001, 128008)
    assert stop_token_ids(llama, None, chat_template=True) == (128009,)  # its eos is its end of turn


def test_a_local_folders_own_files_win_over_the_table(checkpoint_tokenizer, tmp_path):
    """A model folder that states its own eos, stops and positions is read as it is: no table, no family folder."""
    source, tokenizer = checkpoint_tokenizer(QWEN_BASE)
    folder = tmp_path / "my-qwen"
    write_tokenizer(source, folder)
    save_stand_in(source, tokenizer, RehearsalConfig(hidden_size=16, num_layers=1), 0, folder)
    for name, key, value in (("tokenizer_config.json", "eos_token", "<|im_end|>"),
                             ("generation_config.json", "eos_token_id", 151645),
                             ("config.json", "max_position_embeddings", 40960)):  # fmt: skip
        settings = json.loads((folder / name).read_text())
        settings[key] = value
        (folder / name).write_text(json.dumps(settings))
    agent = AgentConfig(
        model=ModelConfig(source="pretrained", path=str(folder)), tokenizer=TokenizerConfig("pretrained")
    )
    own = resolve_agent("mine", agent, None)  # no rehearsal.tokenizers needed
    assert own.tokenizer_dir == folder and "its own files" in own.tokenizer_from
    assert own.stops == (151645,) and own.config["max_position_embeddings"] == 40960
    assert own.special_tokens == {} and own.notes == [] and own.config_from == str(folder)
