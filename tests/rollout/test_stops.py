"""Stop sets: both backends stop at, and cut a response at, the first of an agent's stop ids (agents.stops); a stop
set that is just the EOS gives exactly what the EOS alone gave."""

import random

import pytest
import torch

from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.rollout.hf import HFRolloutEngine, split_response
from hacrl_exp.rollout.vllm import rollouts_from_outputs, sampling_kwargs
from tests.rollout.test_vllm import Completion, Request

TOKENIZER = build_tokenizer("char", "0123456789+=,|")
EOS, PAD = TOKENIZER.eos_token_id, TOKENIZER.pad_token_id
END = TOKENIZER.convert_tokens_to_ids("|")
"""A second stop id, as a chat template's end of turn would be."""


def test_a_stop_set_of_the_eos_alone_cuts_as_the_eos_did():
    rng = random.Random(0)
    for _ in range(500):
        tokens = [rng.choice([EOS, PAD, END, 4, 5, 6]) for _ in range(rng.randint(0, 8))]
        assert split_response(list(tokens), (EOS,), PAD) == split_response(list(tokens), EOS, PAD)


def test_a_response_is_cut_at_the_first_of_its_stop_ids():
    stops = (EOS, END)
    assert split_response([4, 5, END, 6, EOS], stops, PAD) == ([4, 5], True)
    assert split_response([4, EOS, END], stops, PAD) == ([4], True)
    assert split_response([END, 4], stops, PAD) == ([END], True)  # a stop-only response keeps its stop to score
    assert split_response([EOS], stops, PAD) == ([EOS], True)
    assert split_response([4, 5, PAD, PAD], stops, PAD) == ([4, 5], False)  # cut by max_new_tokens, pads dropped
    assert split_response([4, 5, END], {EOS}, PAD) == ([4, 5, END], False)  # END is no stop without the set


@pytest.mark.parametrize("sampling", [SamplingSettings(temperature=0.0, max_new_tokens=10),
                                      SamplingSettings(temperature=1.0, max_new_tokens=10)])  # fmt: skip
def test_the_hf_engine_stops_at_every_stop_id_and_cuts_there(sampling):
    """The same draws with and without END in the stop set: each response with it is the one without it, cut at
    its first END. Random weights, so forced below through the output bias to emit END often."""
    model = build_tiny_model("llama", TOKENIZER, 32, 1, 2, seed=3)
    bias = torch.zeros(len(TOKENIZER))
    bias[END] = 2.0
    hook = model.lm_head.register_forward_hook(lambda module, args, out: out + bias)
    prompts = [TOKENIZER(t)["input_ids"] for t in ("12+7=", "3+45=", "8+8=")]
    try:
        outs = []
        for stops in ((), (EOS, END)):
            torch.manual_seed(0)
            outs.append(HFRolloutEngine(model, TOKENIZER, stop_ids=stops).generate(prompts, 4, sampling))
    finally:
        hook.remove()
    plain, stopped = outs
    assert sum(END in r for r in plain.response_ids) >= 3  # the case is exercised
    for response, finished, cut, cut_finished in zip(
        plain.response_ids, plain.finished, stopped.response_ids, stopped.finished
    ):
        if END in response:
            assert (cut, cut_finished) == (response[: response.index(END)] or [END], True)
        else:
            assert (cut, cut_finished) == (response, finished)
    assert stopped.texts == TOKENIZER.batch_decode(stopped.response_ids, skip_special_tokens=True)


def test_both_backends_are_given_the_same_stop_ids():
    model = build_tiny_model("llama", TOKENIZER, 16, 1, 2)
    sampling = SamplingSettings(max_new_tokens=5)
    alone = HFRolloutEngine(model, TOKENIZER)
    assert alone.stop_ids == (EOS,) and alone._generation_config(sampling).eos_token_id == EOS  # an int, as before
    engine = HFRolloutEngine(model, TOKENIZER, stop_ids=(END, EOS))
    assert engine.stop_ids == (EOS, END)  # the EOS first, each once
    assert sampling_kwargs(sampling, 2, engine.stop_ids)["stop_token_ids"] == [EOS, END]
    assert engine._generation_config(sampling).eos_token_id == [EOS, END]


def test_vllm_outputs_are_cut_at_the_first_stop_id():
    completions = [Completion(0, [5, END, 6], "stop"), Completion(1, [], "stop"), Completion(2, [5, 6], "length")]
    outputs = [Request(completions)]
    rollouts = rollouts_from_outputs(outputs, [[4]], 3, (EOS, END), PAD, TOKENIZER)
    assert rollouts.response_ids == [[5], [EOS], [5, 6]]  # a stop not returned: finished, an empty one keeps EOS
    assert rollouts.finished == [True, True, False]
