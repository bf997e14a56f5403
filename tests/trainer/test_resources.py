"""The run's memory checks use the planner's numbers: a tiny agent's state is the planner's exact parts, and a GPU
placement the planner rejects is refused before any model loads, in one line with exit code 2."""

from __future__ import annotations

import pytest
import torch

from hacrl_exp.agents.devices import MIB, resident_memory
from hacrl_exp.agents.factory import make_agents
from hacrl_exp.agents.memory_plan import estimate_agent, workload
from hacrl_exp.agents.model_shapes import agent_shape
from hacrl_exp.errors import ConfigError
from hacrl_exp.tasks import build_task
from hacrl_exp.trainer.placement import check_placement
from hacrl_exp.trainer.resources import agent_memory, check_memory, model_bytes
from hacrl_exp.trainer.validate import preflight
from tests.cli import run_cli

PAPER_ON_80GB = [
    "experiment=paper_qwen3_4b_8b",
    "executor=ray",
    "executor.gpus_per_agent=1",
    "cluster.gpu_memory_gb=80",
]


def test_model_bytes_are_the_planners_exact_parts_of_the_tiny_agents(tmp_path):
    """model_bytes = weights + gradients + master + AdamW state + reference of the planner; with the tokenizer's
    real vocabulary the planner's parts equal the allocation after one update, byte for byte."""
    no_warm_start = ["agents.members.opt_char.warm_start.steps=0", "agents.members.gpt2_bpe.warm_start.steps=0"]
    config = preflight([f"trainer.cache_dir={tmp_path}", "algorithm.kl_coef=0.001", *no_warm_start])
    for agent in make_agents(config, build_task(config.task), device=torch.device("cpu")):
        cfg = config.agents.members[agent.name]
        assert model_bytes(config, agent.name, cfg) == agent_memory(config, agent.name, cfg).state
        ids = torch.tensor([[1, 3, 4, 5, 6]])
        agent.model(input_ids=ids, labels=ids).loss.backward()
        agent.optimizer.step()
        measured = resident_memory(agent.model, agent.optimizer, agent.reference)
        shape = agent_shape(agent.name, cfg, vocab=len(agent.tokenizer))
        exact = estimate_agent(agent.name, cfg, shape, workload(config, cfg, shape)).state
        parts = ("params", "grads", "optimizer", "reference")
        assert exact == sum(measured[f"memory/{p}_mib"] for p in parts) * MIB
        assert model_bytes(config, agent.name, cfg) >= exact  # a char vocabulary counted at its upper bound


def test_a_placement_the_planner_rejects_is_refused_naming_the_world_size_that_fits():
    refused = (
        r"^agents.members.qwen3_4b.world_size=1 \(fsdp.offload=false\) needs 107.2 GiB per GPU \(97.4 GiB peak "
        r"\+ 10% allocator slack\), the GPUs hold 76.0 GiB usable .* use agents.members.qwen3_4b.world_size=2"
    )
    with pytest.raises(ConfigError, match=refused):
        check_placement(preflight(PAPER_ON_80GB))
    sharded = ["agents.members.qwen3_4b.world_size=2", "agents.members.qwen3_8b.world_size=5"]
    check_placement(preflight([*PAPER_ON_80GB, *sharded]))  # the planner's placement (docs/gpu.md) passes
    offloaded = ["agents.members.qwen3_4b.fsdp.offload=true", "agents.members.qwen3_8b.fsdp.offload=true"]
    check_placement(preflight([*PAPER_ON_80GB, *offloaded]))  # W = 1 with CPU offload fits as well
    check_memory(preflight(["experiment=paper_qwen3_4b_8b"]))  # no GPU and none declared: nothing to check
    check_placement(preflight(["experiment=paper_qwen3_4b_8b"]))


def test_the_run_refuses_it_with_exit_code_2_before_loading_a_model(tmp_path):
    command = [*PAPER_ON_80GB, f"hydra.run.dir={tmp_path}/hydra", f"trainer.output_dir={tmp_path}/run",
               "tracking.backend=none"]  # fmt: skip
    result = run_cli("hacrl_exp.run", command, cwd=tmp_path)
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("ConfigError: agents.members.qwen3_4b.world_size=1"), lines


def test_auto_placement_is_disjoint_on_cpus_and_where_it_fits_else_shared():
    """The run's own choice (trainer.placement.resolve_placement), from the config alone: CPU agents stay disjoint
    (the default run), two agents on one 141 GiB GPU take turns, and an asked placement that cannot fit is refused."""
    from hacrl_exp.trainer.placement import resolve_placement

    assert resolve_placement(preflight([]))[0] == "disjoint"
    assert resolve_placement(preflight(["executor.placement=shared"]))[0] == "shared"  # on CPU: turns, no moves
    pair = ["experiment=paper_qwen3_1p7b_4b", "executor=ray", "executor.gpus_per_agent=1", "cluster.gpu_memory_gb=141"]
    assert resolve_placement(preflight([*pair, "cluster.gpus=2"]))[0] == "disjoint"
    chosen, why = resolve_placement(preflight([*pair, "cluster.gpus=1"]))
    assert chosen == "shared" and why.startswith("auto: disjoint does not fit (executor.placement=disjoint: 2 agent")
    with pytest.raises(ConfigError, match=r"need 2 GPUs of their own, cluster.gpus=1$"):
        resolve_placement(preflight([*pair, "cluster.gpus=1", "executor.placement=disjoint"]))
    with pytest.raises(ConfigError, match=r"executor.placement=shared: qwen3_4b awake 107.17 GiB \+ qwen3_1p7b asleep"):
        resolve_placement(preflight([*pair, "cluster.gpus=1", "cluster.gpu_memory_gb=80", "executor.placement=shared"]))


def test_shared_placement_settings_that_cannot_work_are_one_line():
    with pytest.raises(ConfigError, match=r"executor.gpus_per_agent=2 with executor.placement=shared"):
        preflight(["executor=ray", "executor.placement=shared", "executor.gpus_per_agent=2"])
    with pytest.raises(ConfigError, match=r"agents.members.opt_char.placement/span_nodes with executor.placement=sh"):
        preflight(["executor=ray", "executor.placement=shared", "agents.members.opt_char.placement=node_a"])
    with pytest.raises(ConfigError, match=r"executor.placement='both'|executor.placement"):
        preflight(["executor.placement=both"])
