"""The vLLM backend's request/response mapping, its parity with the HF backend, and its install/GPU errors.

The mapping is tested on the output classes of the CPU fake of vLLM (tests/rollout/fake_vllm.py, checked against
vLLM's source by tests/rollout/test_vllm_contract.py) everywhere, and against vLLM's own classes where vllm imports
(CI installs the wheel without its dependencies: there it does not import); the engine's seeding runs the real
constructor around the fake; the engine on real vLLM needs a CUDA GPU, and those tests skip with the reason otherwise.
"""

import functools
import importlib.util
import random
import subprocess
import sys

import pytest
import torch

import hacrl_exp.rollout.vllm as rollout_vllm
from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.config.schema import VLLMConfig
from hacrl_exp.errors import ConfigError, exit_on_bad_input
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.rollout.hf import HFRolloutEngine, row_seed, split_response
from hacrl_exp.rollout.vllm import (
    VLLMRolloutEngine,
    request_seeds,
    rollouts_from_outputs,
    sampling_kwargs,
    tokens_prompts,
)
from hacrl_exp.trainer.validate import preflight
from tests.rollout import fake_vllm

TOKENIZER = build_tokenizer("char", "0123456789+=,|")
EOS, PAD = TOKENIZER.eos_token_id, TOKENIZER.pad_token_id
HAS_VLLM = importlib.util.find_spec("vllm") is not None
NEEDS_VLLM = "vLLM is not installed (the optional .[gpu] extra, CUDA only)"
NEEDS_GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; none is visible")


@functools.cache
def vllm_import_error() -> str | None:
    """Why vllm's classes do not import here, or None. Tried in a subprocess: importing vllm sets environment variables
    and patches torch, which the other tests of this process must not see."""
    if not HAS_VLLM:
        return NEEDS_VLLM
    code = "from vllm import LLM, SamplingParams"  # vllm exports them lazily: this imports its dependencies
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if done.returncode == 0:
        return None
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return f"vLLM is installed but does not import ({last}): its classes need the .[gpu] extra on CUDA"


def importable_vllm():
    """vllm with its classes, or a skip naming why: not installed, or installed without its dependencies."""
    reason = vllm_import_error()
    if reason:
        pytest.skip(reason)
    import vllm

    return vllm


def Completion(index: int, token_ids: list[int], finish_reason: str | None) -> fake_vllm.CompletionOutput:
    """vllm.CompletionOutput as the fake engine builds it (where vllm cannot import): the fields the mapping reads."""
    return fake_vllm.CompletionOutput(index, "", token_ids, None, None, finish_reason)


def Request(outputs: list) -> fake_vllm.RequestOutput:
    return fake_vllm.RequestOutput("0", None, None, None, outputs, True)


SETTINGS = [
    SamplingSettings(),
    SamplingSettings(temperature=0.7, top_p=0.9, top_k=20, max_new_tokens=12),
    SamplingSettings(temperature=0.0, max_new_tokens=5),
    SamplingSettings(do_sample=False, temperature=0.7, top_k=5),
]


@pytest.mark.parametrize("sampling", SETTINGS)
def test_sampling_settings_match_the_hf_backend(sampling):
    hf = HFRolloutEngine(build_tiny_model("llama", TOKENIZER, 16, 1, 2), TOKENIZER)._generation_config(sampling)
    kwargs = sampling_kwargs(sampling, n=3, stop_ids=EOS)
    assert kwargs["n"] == 3 and kwargs["max_tokens"] == hf.max_new_tokens == sampling.max_new_tokens
    assert kwargs["stop_token_ids"] == [hf.eos_token_id] == [EOS]
    assert kwargs["detokenize"] is False and kwargs["logprobs"] is None  # old log-probs come from the trainer
    assert kwargs["repetition_penalty"] == 1.0 and kwargs["min_p"] == 0.0
    if not hf.do_sample:
        assert kwargs["temperature"] == 0.0  # greedy in vLLM
    else:
        assert (kwargs["temperature"], kwargs["top_p"]) == (hf.temperature, hf.top_p)
        assert kwargs["top_k"] == (hf.top_k or -1)  # HF 0 = vLLM -1 = no top-k


def test_prompt_token_ids_pass_straight_through():
    prompts = [[5, 6, 7], [8], list(range(3, 40))]
    assert tokens_prompts(prompts) == [{"prompt_token_ids": p} for p in prompts]
    assert tokens_prompts([torch.tensor([4, 5]).tolist()]) == [{"prompt_token_ids": [4, 5]}]


def test_outputs_map_to_rollouts_cut_at_eos_like_hf():
    rng = random.Random(0)
    prompts = [[3, 4], [5], [6, 7, 8]]
    n, outputs, expected = 4, [], []
    for _ in prompts:
        completions = []
        for i in range(n):
            tokens = [rng.choice([EOS, PAD, 4, 5, 6, 7]) for _ in range(rng.randint(0, 6))]
            reason = "stop" if EOS in tokens else "length"
            completions.append(Completion(i, tokens, reason))
            expected.append(split_response(list(tokens), EOS, PAD))
        outputs.append(Request(list(reversed(completions))))  # vLLM may return completions out of index order
    rollouts = rollouts_from_outputs(outputs, prompts, n, EOS, PAD, TOKENIZER)
    assert rollouts.prompt_ids == [p for p in prompts for _ in range(n)]  # row r belongs to prompt r // n
    assert [(r, f) for r, f in zip(rollouts.response_ids, rollouts.finished)] == expected
    assert rollouts.texts == TOKENIZER.batch_decode(rollouts.response_ids, skip_special_tokens=True)


def test_stop_without_the_eos_token_is_finished_and_eos_only_keeps_one_eos():
    outputs = [Request([Completion(0, [5, 6], "stop"), Completion(1, [], "stop"), Completion(2, [EOS], "stop")])]
    rollouts = rollouts_from_outputs(outputs, [[4]], 3, EOS, PAD, TOKENIZER)
    assert rollouts.response_ids == [[5, 6], [EOS], [EOS]]
    assert rollouts.finished == [True, True, True]
    with pytest.raises(ValueError, match="expected n=2"):
        rollouts_from_outputs(outputs, [[4]], 2, EOS, PAD, TOKENIZER)
    with pytest.raises(ValueError, match="1 vLLM outputs for 2 prompts"):
        rollouts_from_outputs(outputs, [[4], [5]], 3, EOS, PAD, TOKENIZER)


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here, so selecting it is not an error")
def test_vllm_backend_without_vllm_is_one_config_error_with_exit_code_2(capsys):
    with pytest.raises(SystemExit) as exit_info, exit_on_bad_input():
        preflight(["rollout=vllm"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and 'pip install -e ".[gpu]"' in err and "rollout.backend=vllm" in err

    model = build_tiny_model("llama", TOKENIZER, 16, 1, 2)
    with pytest.raises(ConfigError, match=r"needs vLLM, which does not import .*\.\[gpu\]"):
        VLLMRolloutEngine(model, TOKENIZER, VLLMConfig())


def test_vllm_sampling_params_accept_the_mapping():
    vllm = importable_vllm()
    for sampling in SETTINGS:
        kwargs = sampling_kwargs(sampling, n=2, stop_ids=EOS)
        params = vllm.SamplingParams(**kwargs)
        assert (params.n, params.max_tokens, params.temperature) == (2, sampling.max_new_tokens, kwargs["temperature"])
        assert list(params.stop_token_ids) == [EOS]
    seeded = vllm.SamplingParams(**sampling_kwargs(SETTINGS[1], 1, EOS), seed=request_seeds(3, 1)[0])
    assert seeded.seed == row_seed(3, 0)


def test_each_row_is_one_request_seeded_from_the_call_seed_and_its_index_in_the_call():
    seeds = request_seeds(99, 6)
    assert seeds == [row_seed(99, i) for i in range(6)]
    assert len(set(seeds)) == 6 and all(0 <= seed < 2**63 for seed in seeds)
    # a replica that serves rows [2, 6) of the call sends exactly those rows' seeds
    assert request_seeds(99, 4, first_row=2) == seeds[2:]
    assert request_seeds(None, 6) == [None] * 6  # greedy


def fake_engine(monkeypatch) -> VLLMRolloutEngine:
    """The real VLLMRolloutEngine around the CPU fake of vLLM (tests/rollout/fake_vllm.py; vLLM itself needs CUDA)."""
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm)
    monkeypatch.setattr(rollout_vllm, "cuda_index", lambda model: 0)  # the fake runs on the CPU
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    monkeypatch.setenv("VLLM_HOST_IP", "127.0.0.1")
    model = build_tiny_model("llama", TOKENIZER, 16, 1, 2)
    return VLLMRolloutEngine(model, TOKENIZER, VLLMConfig(sleep_level=0), dtype="float32")


def test_the_engine_takes_one_call_seed_from_the_agent_stream_and_seeds_each_row(monkeypatch):
    engine, prompts = fake_engine(monkeypatch), [[4, 5], [6], [7, 8, 9]]
    torch.manual_seed(5)
    out = engine.generate(prompts, 2, SamplingSettings(max_new_tokens=4))
    torch.manual_seed(5)
    call_seed = int(torch.randint(0, 2**63 - 1, (1,)).item())
    requests = engine.llm.params[-1]
    assert [p.seed for p in requests] == [row_seed(call_seed, r) for r in range(6)] and {p.n for p in requests} == {1}
    assert engine.llm.requests[-1] == [p for p in prompts for _ in range(2)] == out.prompt_ids
    assert out.response_ids[0] != out.response_ids[1]  # two rows of one prompt: two seeds, two draws


def test_vllm_output_classes_map_to_rollouts():
    importable_vllm()
    from vllm.inputs import TokensPrompt
    from vllm.outputs import CompletionOutput, RequestOutput

    assert set(tokens_prompts([[4, 5]])[0]) <= set(TokensPrompt.__annotations__)
    completions = [
        CompletionOutput(index=i, text="", token_ids=ids, cumulative_logprob=None, logprobs=None, finish_reason=reason)
        for i, (ids, reason) in enumerate([([5, 6, EOS], "stop"), ([7, 8], "length")])
    ]
    output = RequestOutput(
        request_id="0", prompt=None, prompt_token_ids=[4], prompt_logprobs=None, outputs=completions, finished=True
    )
    rollouts = rollouts_from_outputs([output], [[4]], 2, EOS, PAD, TOKENIZER)
    assert rollouts.response_ids == [[5, 6], [7, 8]] and rollouts.finished == [True, False]


@NEEDS_GPU
def test_vllm_engine_follows_the_training_model():
    importable_vllm()
    from hacrl_exp.rollout.vllm import VLLMRolloutEngine

    torch.manual_seed(0)
    model = build_tiny_model("llama", TOKENIZER, 64, 2, 4).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    engine = VLLMRolloutEngine(model, TOKENIZER, VLLMConfig(enforce_eager=True), dtype="float32", optimizer=optimizer)
    hf = HFRolloutEngine(model, TOKENIZER)
    prompts, greedy = [[4, 5, 6], [7, 8]], SamplingSettings(do_sample=False, temperature=0.0, max_new_tokens=8)
    assert engine.generate(prompts, 1, greedy).response_ids == hf.generate(prompts, 1, greedy).response_ids
    ids = torch.tensor([[4, 5, 6, 7, 8, 9]], device="cuda")
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()  # the engine must take the new weights before its next generation
    assert engine.stale
    assert engine.generate(prompts, 1, greedy).response_ids == hf.generate(prompts, 1, greedy).response_ids
    sampled = engine.generate(prompts, 4, SamplingSettings(max_new_tokens=6))
    assert len(sampled) == 8 and all(0 < len(r) <= 6 for r in sampled.response_ids)
