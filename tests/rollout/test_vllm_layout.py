"""The vLLM engine's layout on CPU against the fake engine (tests/rollout/fake_vllm.py): W = data-parallel ×
tensor-parallel, each replica its contiguous share of the rows, all-gathered in order on every rank (four forked
gloo ranks, tests/gloo_ranks.py); and one engine's calls at W = 1 (weights sync, sleep and wake, one request per
row)."""

from __future__ import annotations

import re

import pytest
import torch

from hacrl_exp.agents.tiny import build_tiny_model
from hacrl_exp.config.schema import VLLMConfig
from hacrl_exp.errors import exit_on_bad_input
from hacrl_exp.rollout import vllm as rollout_vllm
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.rollout.vllm import Layout, VLLMRolloutEngine
from hacrl_exp.trainer.validate import preflight
from tests.gloo_ranks import join_cpu_group, run_ranks
from tests.rollout import fake_vllm
from tests.rollout.test_vllm import TOKENIZER

WORLD = 4
PROMPTS = [[4, 5, 6], [7, 8], [9, 10, 11, 4], [5, 5], [12, 13]]
SAMPLING = SamplingSettings(temperature=0.8, max_new_tokens=6)


def test_layout_splits_ranks_into_replicas_and_rows_into_contiguous_shares():
    assert [Layout(4, 2, r).replica for r in range(4)] == [0, 0, 1, 1]  # vLLM's RANK // T
    assert [Layout(4, 2, r).rows(10) for r in range(4)] == [(0, 5), (0, 5), (5, 10), (5, 10)]
    assert [Layout(4, 1, r).rows(10) for r in range(4)] == [(0, 2), (2, 5), (5, 7), (7, 10)]
    assert [Layout(4, 1, r).rows(1) for r in range(4)] == [(0, 0), (0, 0), (0, 0), (0, 1)]  # replicas with none
    assert Layout(4, 4, 3).rows(7) == (0, 7) and Layout().rows(7) == (0, 7)
    assert str(Layout(4, 2)) == "W=4 = 2 data-parallel × 2 tensor-parallel"
    assert Layout.of(1, 4) == Layout(1, 1) and str(Layout.of(1, 4)) == "W=1 = 1 data-parallel × 1 tensor-parallel"
    assert Layout().engine_kwargs() == {}
    assert Layout(4, 2, 1).engine_kwargs() == dict(
        tensor_parallel_size=2, data_parallel_size=2, distributed_executor_backend="external_launcher"
    )
    for world, tp, rank in [(4, 3, 0), (2, 1, 2), (2, 2, -1)]:
        with pytest.raises(ValueError, match="tensor_parallel"):
            Layout(world, tp, rank)


def _engine(model, layout: Layout, **kwargs) -> VLLMRolloutEngine:
    return VLLMRolloutEngine(model, TOKENIZER, VLLMConfig(), dtype="float32", seed=5, layout=layout, **kwargs)


def test_one_engine_syncs_sleeps_and_sends_one_request_per_row(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "vllm", fake_vllm)
    monkeypatch.setattr(rollout_vllm, "cuda_index", lambda model: 0)  # the fake runs on the CPU
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    monkeypatch.setenv("VLLM_HOST_IP", "127.0.0.1")
    torch.manual_seed(0)
    model = build_tiny_model("llama", TOKENIZER, 16, 1, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = _engine(model, Layout(), optimizer=optimizer)
    llm = engine.llm
    assert llm.kwargs["load_format"] == "dummy" and "distributed_executor_backend" not in llm.kwargs
    assert llm.calls == ["sleep(2)"] and engine.stale
    out = engine.generate(PROMPTS[:2], 3, SAMPLING)
    assert llm.calls[1:] == ["wake_up(['weights'])", "apply_model", "reset_prefix_cache", "wake_up(['kv_cache'])",
                             "generate", "sleep(2)"]  # fmt: skip
    assert llm.requests == [[p for p in PROMPTS[:2] for _ in range(3)]]  # one request per row, rows by prompt
    assert out.prompt_ids == llm.requests[0] and len(out.response_ids) == 6 and out.finished.count(True) >= 1
    assert engine.stale  # sleep level 2 dropped the weights
    engine.settings = VLLMConfig(sleep_level=1)
    engine.generate(PROMPTS[:1], 1, SAMPLING)
    assert all(torch.equal(llm.model.loaded[k], v) for k, v in model.state_dict().items()) and not engine.stale
    engine.generate(PROMPTS[:1], 1, SAMPLING)
    assert llm.calls.count("apply_model") == 2  # level 1 kept them: no sync
    model(input_ids=torch.tensor([[4, 5, 6]]), labels=torch.tensor([[4, 5, 6]])).loss.backward()
    optimizer.step()
    assert engine.stale  # the optimizer's hook


def _rank(rank: int, ports, folder: str) -> None:
    torch.set_num_threads(1)
    fake_vllm.install()
    rollout_vllm.cuda_index = lambda model: 0  # this process's fake "GPU"
    torch.manual_seed(0)
    model = build_tiny_model("llama", TOKENIZER, 16, 1, 2)
    alone = _engine(model, Layout())  # W = 1: every row in one engine
    torch.manual_seed(1)  # each call takes its seed from the torch stream: every layout below starts from this one
    expected = [alone.generate(PROMPTS, 2, SAMPLING), alone.generate(PROMPTS[:1], 1, SAMPLING)]
    join_cpu_group(rank, WORLD, ports)
    result = {"expected": [(e.prompt_ids, e.response_ids, e.texts, e.finished) for e in expected]}
    for tp in (1, 2, 4):
        engine = _engine(model, Layout(WORLD, tp, rank))
        torch.manual_seed(1)
        got = [engine.generate(PROMPTS, 2, SAMPLING), engine.generate(PROMPTS[:1], 1, SAMPLING)]
        result[tp] = {
            "got": [(g.prompt_ids, g.response_ids, g.texts, g.finished) for g in got],
            "requests": engine.llm.requests,  # what this rank's engine generated
            "replica": engine.llm.replica,  # as vLLM derives it from RANK
            "kwargs": {k: engine.llm.kwargs.get(k) for k in ("tensor_parallel_size", "data_parallel_size")},
        }
    torch.distributed.destroy_process_group()
    torch.save(result, f"{folder}/rank{rank}.pt")


def test_replicas_generate_their_share_and_every_rank_gets_every_row_in_order(tmp_path):
    run_ranks(_rank, WORLD, str(tmp_path))
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]
    rows = [p for p in PROMPTS for _ in range(2)]  # 10 rows, then 1
    for tp in (1, 2, 4):
        replicas = WORLD // tp
        for rank, result in enumerate(results):
            mine = result[tp]
            d = rank // tp
            assert mine["got"] == result["expected"], (tp, rank)  # every rank holds W = 1's rows, in order
            assert mine["replica"] == d and mine["kwargs"] == {
                "tensor_parallel_size": tp,
                "data_parallel_size": replicas,
            }
            share = rows[10 * d // replicas : 10 * (d + 1) // replicas]
            one = [PROMPTS[0]] if d == replicas - 1 else []  # the single row: the last replica's; others send none
            assert mine["requests"] == [share, one], (tp, rank)
            assert mine["requests"] == results[d * tp][tp]["requests"]  # a replica's ranks send the same requests


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["rollout.tensor_parallel=2"],
            r"^rollout.tensor_parallel=2 is for rollout=vllm only .*tensor_parallel=1",
        ),
        (
            ["rollout=vllm", "rollout.tensor_parallel=2", "executor=ray", "agents.members.opt_char.world_size=3"],
            r"^agents.members.opt_char.world_size=3 is not divisible by rollout.tensor_parallel=2 .*multiple of 2",
        ),
    ],
)
def test_a_layout_that_cannot_be_built_is_one_config_error_with_exit_code_2(overrides, message, capsys):
    with pytest.raises(SystemExit) as stop, exit_on_bad_input():
        preflight(overrides)
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and "\n" not in err and re.search(message, err.removeprefix("ConfigError: ")), err
