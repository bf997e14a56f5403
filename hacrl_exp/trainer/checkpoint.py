"""Atomic checkpoints that hold everything needed to resume exactly.

Layout of <dir>/step_000042/:
  agents/<name>/      save_pretrained (safetensors) model + tokenizer, loadable by any HF tool
  optim/<name>.pt     optimizer state (loaded with weights_only=True)
  rng.pt              torch RNG state
  state.json          step, capability trackers, counters, MLflow run ids
A checkpoint is written into a temporary folder, fsynced, then renamed into place; `latest` is
replaced atomically afterwards. A crash at any point leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from hacrl_exp.agents.agent import Agent, save_agent

LATEST = "latest"


def _fsync_tree(folder: Path) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())


def write_text_atomic(path: Path, text: str) -> None:
    """Write a small file via a temp file and os.replace, so readers see old or new content, never half."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def save_checkpoint(root: Path, step: int, agents: list[Agent], state: dict[str, Any], keep: int) -> Path:
    """Write checkpoint `step` atomically under root, point `latest` at it, and keep the newest `keep`."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    tmp = root / f".tmp_step_{step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    for agent in agents:
        save_agent(agent, tmp / "agents" / agent.name)
        if agent.optimizer is not None:
            (tmp / "optim").mkdir(parents=True, exist_ok=True)
            torch.save(agent.optimizer.state_dict(), tmp / "optim" / f"{agent.name}.pt")
    torch.save({"torch": torch.get_rng_state()}, tmp / "rng.pt")
    (tmp / "state.json").write_text(json.dumps({**state, "step": step}, indent=1))
    _fsync_tree(tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    write_text_atomic(root / LATEST, final.name)
    for old in sorted(root.glob("step_*"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def find_checkpoint(path: Path) -> Path | None:
    """The latest complete checkpoint under a run folder, its checkpoints folder, or a step folder itself."""
    for candidate in (path, path / "checkpoints"):
        if (candidate / "state.json").is_file():
            return candidate
        pointer = candidate / LATEST
        if pointer.is_file():
            step_dir = candidate / pointer.read_text().strip()
            if (step_dir / "state.json").is_file():
                return step_dir
    return None


def load_checkpoint(folder: Path, agents: list[Agent]) -> dict[str, Any]:
    """Restore weights, optimizers and RNG into built agents; return the saved trainer state."""
    from safetensors.torch import load_file

    for agent in agents:
        weights: dict[str, torch.Tensor] = {}
        for shard in sorted((folder / "agents" / agent.name).glob("*.safetensors")):
            weights.update(load_file(shard, device=str(agent.model.device)))
        missing, unexpected = agent.model.load_state_dict(weights, strict=False)
        tied = set(getattr(agent.model, "_tied_weights_keys", None) or [])
        if unexpected or any(key not in tied and "lm_head" not in key for key in missing):
            raise RuntimeError(f"checkpoint {folder} does not match agent {agent.name}: missing {missing}")
        if agent.optimizer is not None:
            agent.optimizer.load_state_dict(torch.load(folder / "optim" / f"{agent.name}.pt", weights_only=True))
    torch.set_rng_state(torch.load(folder / "rng.pt", weights_only=True)["torch"])
    return json.loads((folder / "state.json").read_text())
