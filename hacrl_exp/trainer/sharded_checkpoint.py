"""A sharded agent's part of a checkpoint: the same `save_pretrained` folder as an unsharded agent's, plus its AdamW
state sharded with torch.distributed.checkpoint (DCP).

Layout inside the checkpoint folder (next to the unsharded agents' parts, hacrl_exp.trainer.checkpoint):
  agents/<name>/        save_pretrained folder, written by rank 0 from the full state dict gathered on it
  optim/<name>.dcp/     DCP: one `__<rank>_0.distcp` file per rank and rank 0's `.metadata`
  rng/<name>.pt         the agent's random stream (identical on every rank; rank 0 writes it)
Every rank writes into the driver's unpublished temporary folder, which the driver fsyncs and renames into place
once every worker has returned, so a sharded checkpoint is as atomic as any other. Resume is exact: the full
weights are re-sharded on load, DCP restores each rank's optimizer shard (and reshards to another W).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from hacrl_exp.agents.agent import Agent, save_tokenizer
from hacrl_exp.agents.sharding import (
    full_state_dict,
    load_full_state_dict,
    load_sharded_optimizer,
    save_sharded_optimizer,
)


def save_sharded_agent_state(agent: Agent, folder: Path, rng: dict[str, torch.Tensor], rank: int) -> None:
    """Rank `rank`'s share of writing a sharded agent into checkpoint `folder` (every rank calls it)."""
    weights = full_state_dict(agent.model)  # a collective: every rank gathers, rank 0 keeps the result
    target = folder / "agents" / agent.name
    if rank == 0:
        # the gathered dict holds a tied weight under both names as two tensors, which save_pretrained cannot see
        # as one: keep the name named_parameters() keeps, as an unsharded save does
        names = {n for n, _ in agent.model.named_parameters()} | {n for n, _ in agent.model.named_buffers()}
        weights = {k: v for k, v in weights.items() if k in names}
        agent.model.save_pretrained(target, state_dict=weights, safe_serialization=True)
        _unwrapped_architecture(target / "config.json")
        save_tokenizer(agent.tokenizer, target)
        (folder / "rng").mkdir(parents=True, exist_ok=True)
        torch.save(rng, folder / "rng" / f"{agent.name}.pt")
    del weights
    if agent.optimizer is not None:
        save_sharded_optimizer(agent.model, agent.optimizer, folder / "optim" / f"{agent.name}.dcp")


def load_sharded_agent_state(folder: Path, agent: Agent) -> dict[str, torch.Tensor] | None:
    """Restore a sharded agent from checkpoint `folder` on every rank; returns its random stream (None if absent)."""
    from safetensors.torch import load_file

    weights: dict[str, torch.Tensor] = {}
    for shard in sorted((folder / "agents" / agent.name).glob("*.safetensors")):
        weights.update(load_file(shard))  # CPU; each rank keeps only its shard
    load_full_state_dict(agent.model, weights)
    del weights
    if agent.optimizer is not None:
        load_sharded_optimizer(agent.model, agent.optimizer, folder / "optim" / f"{agent.name}.dcp")
    rng = folder / "rng" / f"{agent.name}.pt"
    return torch.load(rng, weights_only=True) if rng.is_file() else None


def _unwrapped_architecture(config_file: Path) -> None:
    """save_pretrained names the FSDP wrapper class (FSDPOPTForCausalLM): write the model's own class instead."""
    config = json.loads(config_file.read_text())
    config["architectures"] = [name.removeprefix("FSDP") for name in config.get("architectures") or []]
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
