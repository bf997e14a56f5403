"""Atomic checkpoints that hold everything needed to resume exactly.

Layout of <dir>/step_000042/:
  agents/<name>/      save_pretrained (safetensors) model + tokenizer, loadable by any HF tool
  optim/<name>.pt     optimizer state (loaded with weights_only=True)
  rng/<name>.pt       the agent worker's own random stream (hacrl_exp.trainer.worker)
  rng.pt              the driver's torch RNG state
  state.json          step, capability trackers, counters, MLflow run ids and store, the resolved config + hash
  manifest.json       size and SHA-256 of every other file, checked before the checkpoint is used
A checkpoint is written into a temporary folder, fsynced, then renamed into place; `latest` is
replaced atomically afterwards; rotated folders are renamed to `.old_step_*` before they are deleted. A crash at any
point leaves the previous checkpoint intact and never a half-deleted `step_*`.
Each agent worker writes and reads its own part (`save_agent_state`, `load_agent_state`); with Ray actors on
several machines the run folder must be on storage every node sees.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from hacrl_exp.agents.agent import Agent, save_agent
from hacrl_exp.agents.lora import is_lora, load_adapter
from hacrl_exp.agents.manifest import STEP_FOLDER, checkpoint_problem, write_manifest
from hacrl_exp.faults import crash_point
from hacrl_exp.paths import check_free_space, output_error, replace_atomic, size_of
from hacrl_exp.trainer.signals import held

LATEST = "latest"


def _fsync_tree(folder: Path) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())


def write_text_atomic(path: Path, text: str) -> None:
    """Write a small file via a temp file and os.replace, so readers see old or new content, never half; only a
    regular file is ever replaced (`hacrl_exp.paths.replace_atomic`)."""
    replace_atomic(path, lambda tmp: tmp.write_text(text))


def save_checkpoint(
    root: Path, step: int, write_agents: Callable[[Path], Any], state: dict[str, Any], keep: int
) -> Path:
    """Write checkpoint `step` atomically under root, point `latest` at it, and keep the newest `keep`.

    write_agents(folder) writes every agent's part into the unpublished folder (each worker's `save`).
    """
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    tmp = root / f".tmp_step_{step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    then = f"then resume with trainer.resume={root.parent}"
    published = sorted(root.glob("step_*"))
    if published:  # the next checkpoint is about the size of the last one; the kept ones stay until it is published
        needed, what = size_of(published[-1]), f"checkpoint {step} (the size of {published[-1].name})"
        check_free_space(root, needed, what, f"free space, {then}")
    try:
        tmp.mkdir()
        write_agents(tmp)
        torch.save({"torch": torch.get_rng_state()}, tmp / "rng.pt")
        (tmp / "state.json").write_text(json.dumps({**state, "step": step}, indent=1))
        write_manifest(tmp)
        _fsync_tree(tmp)
    except (OSError, RuntimeError) as exc:  # torch reports a full disk as RuntimeError("... unexpected pos ...")
        error = output_error(exc, tmp, then)
        shutil.rmtree(tmp, ignore_errors=True)  # the previous checkpoint stays the latest
        if error is None:
            raise
        raise error from None
    crash_point("checkpoint")  # fault-injection hook (hacrl_exp.faults): files written, not yet published
    with held():  # a second Ctrl-C waits for these renames: never a published folder without its pointer
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
        write_text_atomic(root / LATEST, final.name)
        for old in sorted(root.glob("step_*"))[:-keep]:  # rotation: renamed out first, so no half-deleted step_*
            shutil.rmtree(trash := old.with_name(f".old_{old.name}"), ignore_errors=True)
            os.rename(old, trash)
    for leftover in sorted(root.glob(".old_step_*")) + sorted(root.glob(".tmp_step_*")):  # and a crash's leftovers
        shutil.rmtree(leftover, ignore_errors=True)
    return final


def find_checkpoint(path: Path) -> Path | None:
    """The latest complete checkpoint under a run folder, its checkpoints folder, or a step folder itself.

    `latest` names it; without a usable `latest` (a crash between the rename and the pointer), the newest
    step_* folder, which is complete because only whole checkpoints are renamed into place.
    """
    for candidate in (path, path / "checkpoints"):
        if (candidate / "state.json").is_file():
            return candidate
        pointer = candidate / LATEST
        named = pointer.read_text().strip() if pointer.is_file() else ""
        if STEP_FOLDER.fullmatch(named) and (candidate / named / "state.json").is_file():  # never ../ another run
            return candidate / named
        complete = [d for d in sorted(candidate.glob("step_*")) if (d / "state.json").is_file()]
        if complete:
            return complete[-1]
    return None


def intact_checkpoint(path: Path) -> tuple[Path | None, list[str]]:
    """The newest checkpoint under `path` whose files match their manifest, and a line for each newer damaged one.

    `path` is a run folder, its checkpoints folder or one step folder (then only that one is a candidate).
    """
    first = find_checkpoint(path)
    if first is None:
        return None, []
    older = sorted(first.parent.glob("step_*"), reverse=True) if first != path else []
    damaged = []
    for folder in [first, *(d for d in older if d.name < first.name and (d / "state.json").is_file())]:
        problem = checkpoint_problem(folder)
        if problem is None:
            return folder, damaged
        damaged.append(problem)
    return None, damaged


def load_checkpoint(folder: Path) -> dict[str, Any]:
    """Restore the driver's RNG; return the saved trainer state (agents load their part with load_agent_state)."""
    torch.set_rng_state(torch.load(folder / "rng.pt", weights_only=True)["torch"])
    return json.loads((folder / "state.json").read_text())


def save_agent_state(agent: Agent, folder: Path, rng: dict[str, torch.Tensor]) -> None:
    """One agent's part of checkpoint `folder`: weights + tokenizer, optimizer state, and its random stream."""
    save_agent(agent, folder / "agents" / agent.name)
    if agent.optimizer is not None:
        (folder / "optim").mkdir(parents=True, exist_ok=True)
        torch.save(agent.optimizer.state_dict(), folder / "optim" / f"{agent.name}.pt")
    (folder / "rng").mkdir(parents=True, exist_ok=True)
    torch.save(rng, folder / "rng" / f"{agent.name}.pt")


def load_agent_state(folder: Path, agent: Agent) -> dict[str, torch.Tensor] | None:
    """Restore one agent's weights and optimizer from checkpoint `folder`; return its random stream (None in
    checkpoints written before agents had their own)."""
    from safetensors.torch import load_file

    if is_lora(agent.model):  # its frozen base is rebuilt from the config: only the adapter changed (agents.lora)
        load_adapter(agent.model, folder / "agents" / agent.name)
    else:
        weights: dict[str, torch.Tensor] = {}
        for shard in sorted((folder / "agents" / agent.name).glob("*.safetensors")):
            weights.update(load_file(shard, device=str(agent.model.device)))
        missing, unexpected = agent.model.load_state_dict(weights, strict=False)
        tied = set(getattr(agent.model, "_tied_weights_keys", None) or [])
        if unexpected or any(key not in tied and "lm_head" not in key for key in missing):
            raise RuntimeError(f"checkpoint {folder} does not match agent {agent.name}: missing {missing}")
    if agent.optimizer is not None:
        agent.optimizer.load_state_dict(torch.load(folder / "optim" / f"{agent.name}.pt", weights_only=True))
    rng = folder / "rng" / f"{agent.name}.pt"
    return torch.load(rng, weights_only=True) if rng.is_file() else None
