"""The GPU check's FSDP2 rows: one agent sharded over a process group of one rank (W = 1; one GPU cannot host two
NCCL ranks), a GSPO step with CPU offload off and on, its peak memory next to the resource planner's prediction.

W = 1 still runs FSDP2's machinery (per-layer all-gather and reduce-scatter units, MixedPrecisionPolicy with bf16
parameters and float32 reduction on GPU, CPUOffloadPolicy), so the measured peak checks the planner's `peaks`
(sharded=True) for the placements it proposes with offload. On CPU (--smoke) the group is gloo and no peak is
measured.
"""

from __future__ import annotations

import gc

import torch

from benchmarks.gpu_workload import GIB, Sizes, make_agents, measure_training
from hacrl_exp.agents.memory_plan import Workload, estimate_agent
from hacrl_exp.agents.model_shapes import shape_from_hf_config
from hacrl_exp.agents.sharding import init_rank_group, shard_agent, store_socket
from hacrl_exp.config.schema import AgentConfig, FsdpConfig, LoraConfig, ModelConfig


def workload_of(sizes: Sizes) -> Workload:
    """The planner's Workload of benchmarks.gpu_workload's step (one agent's rows, 2 updates per step)."""
    rows = sizes.prompts * sizes.group
    return Workload(min(sizes.micro_batch, rows // 2), sizes.prompt_len + sizes.response_len, rows, rows, False,
                    False, 0.0, True, response_len=sizes.response_len)  # fmt: skip


def planned_peak(agent, cfg: AgentConfig, sizes: Sizes, offload: bool, gpu_bytes: int) -> float:
    """The planner's update peak (GiB) of this agent as FSDP2 at W = 1."""
    mem = estimate_agent(agent.name, cfg, shape_from_hf_config(agent.model.config), workload_of(sizes))
    return mem.peaks(1, offload, gpu_bytes, sharded=True)[0] / GIB


def measure_fsdp(sizes: Sizes, device: torch.device, tokenizer, model_cfg: ModelConfig, emit=None) -> dict[str, dict]:
    """{'fsdp_offload_off': ..., 'fsdp_offload_on': ...}: measure_training's numbers plus 'planned_gib' and
    'planned_over_measured'; `emit(name, result)` is called as each is measured."""
    listening = store_socket()
    init_rank_group(0, 1, listening.getsockname()[1], device, listening)
    gpu_bytes = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else 80 * GIB
    out = {}
    try:
        for offload in (False, True):
            cfg = AgentConfig(model=model_cfg, lr=1e-6, weight_decay=0.0, fsdp=FsdpConfig(offload=offload))
            agents = make_agents(sizes, device, tokenizer, model_cfg, LoraConfig(), n=1)
            shard_agent(agents[0], cfg, offload)
            result = measure_training(agents, "gspo", sizes, device)
            result["planned_gib"] = planned_peak(agents[0], cfg, sizes, offload, gpu_bytes)
            result["planned_over_measured"] = result["planned_gib"] / result["peak_gib"]
            name = f"fsdp_offload_{'on' if offload else 'off'}"
            out[name] = result
            if emit is not None:
                emit(name, result)
            del agents
            gc.collect()  # FSDP modules hold reference cycles: free this agent before the next one is measured
            if device.type == "cuda":
                torch.cuda.empty_cache()
    finally:
        torch.distributed.destroy_process_group()
        listening.close()
    return out
