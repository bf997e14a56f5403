"""Which models to evaluate: model folders, checkpoint step folders, or a training run's whole checkpoint series.

Accepted paths (hacrl_exp.trainer.checkpoint layout):
  <model>/                              a save_pretrained folder (config.json, weights, tokenizer): one agent
  <run>/checkpoints/step_000042/        a step folder (state.json, agents/<name>/): each of its agents
  <run>/checkpoints/ or <run>/          every complete step_* folder, oldest first
The step and the MLflow run ids (state.json `run_ids`: "" = training parent run, <name> = agent run) come along, so
an evaluation run can be linked to the training run. Resolving touches only the file system; loading imports torch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hacrl_exp.agents.manifest import checkpoint_problem, model_folder_problem
from hacrl_exp.errors import ConfigError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from hacrl_exp.agents.agent import Agent

_WEIGHTS = ("*.safetensors", "pytorch_model*.bin")
_TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


@dataclass(frozen=True)
class AgentCheckpoint:
    """One agent's model folder, with where it came from."""

    path: Path
    agent: str
    step: int | None = None
    run_dir: Path | None = None
    run_ids: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def label(self) -> str:
        """Short name for tables and run names: agent@step."""
        return f"{self.agent}@{self.step}" if self.step is not None else self.agent


def is_model_dir(path: Path) -> bool:
    """A save_pretrained folder: config.json plus weights plus tokenizer files."""
    return (
        (path / "config.json").is_file()
        and any(next(path.glob(p), None) for p in _WEIGHTS)
        and any((path / t).is_file() for t in _TOKENIZER)
    )


def _step_of(step_dir: Path) -> tuple[int | None, dict[str, str]]:
    """(step, run_ids) from a step folder's state.json; (None, {}) when unreadable."""
    try:
        state = json.loads((step_dir / "state.json").read_text())
        return int(state.get("step")), dict(state.get("run_ids") or {})
    except (OSError, ValueError, TypeError):
        return None, {}


def _from_step_dir(step_dir: Path) -> list[AgentCheckpoint]:
    step, run_ids = _step_of(step_dir)
    run_dir = step_dir.parent.parent if step_dir.parent.name == "checkpoints" else None
    agents = sorted(p for p in (step_dir / "agents").iterdir() if p.is_dir()) if (step_dir / "agents").is_dir() else []
    return [AgentCheckpoint(a, a.name, step, run_dir, run_ids) for a in agents if is_model_dir(a)]


def _series(folder: Path) -> list[Path]:
    """Complete step folders (with state.json) under a checkpoints folder, oldest first."""
    return sorted(p for p in folder.glob("step_*") if p.is_dir() and (p / "state.json").is_file())


def resolve_checkpoints(paths: Sequence[str], agents: Sequence[str] | None = None) -> list[AgentCheckpoint]:
    """Every agent checkpoint the given paths name (module docstring), filtered to `agents` when given.

    Raises ConfigError naming the path when one does not exist or holds no model, and naming the agent (with the
    ones available) when a filter matches nothing.
    """
    if not paths:
        raise ConfigError(
            "checkpoints is empty; give a model folder, a checkpoint step folder or a training run folder"
        )
    found: list[AgentCheckpoint] = []
    for i, raw in enumerate(paths):
        path = Path(str(raw)).expanduser()
        key = f"checkpoints[{i}]={str(raw)!r}"
        if not path.exists():
            raise ConfigError(f"{key} does not exist")
        unpublished = next((p for p in (path, *path.parents) if p.name.startswith(".tmp_step_")), None)
        if unpublished is not None:  # trainer.checkpoint.save_checkpoint's folder before the rename that publishes it
            raise ConfigError(
                f"{key} is in {unpublished.name}, a checkpoint that was never completed (left by a crash while it was "
                "written); give a published step_* folder or the run folder"
            )
        if is_model_dir(path):
            step_dir = path.parent.parent if path.parent.name == "agents" else None
            in_checkpoint = step_dir is not None and (step_dir / "state.json").is_file()
            problem = checkpoint_problem(step_dir) if in_checkpoint else model_folder_problem(path)
            if problem:
                where = "in a damaged checkpoint" if in_checkpoint else "a damaged model folder"
                raise ConfigError(f"{key} is {where}: {problem}; give an intact one")
            step, run_ids = _step_of(step_dir) if step_dir else (None, {})
            run_dir = step_dir.parent.parent if step_dir and step_dir.parent.name == "checkpoints" else None
            found.append(AgentCheckpoint(path, path.name, step, run_dir, run_ids))
            continue
        if (path / "state.json").is_file():
            if problem := checkpoint_problem(path):
                raise ConfigError(f"{key} is a damaged checkpoint: {problem}; give an intact one")
            step_dirs = [path]
        else:  # a run's series: a damaged checkpoint is left out, with a warning naming the file
            step_dirs = _series(path) or _series(path / "checkpoints")
            for damaged in [d for d in step_dirs if checkpoint_problem(d)]:
                log.warning("%s: leaving out a damaged checkpoint: %s", key, checkpoint_problem(damaged))
                step_dirs.remove(damaged)
        items = [c for d in step_dirs for c in _from_step_dir(d)]
        if not items:
            hint = " (config.json found, but no weights or tokenizer files)" if (path / "config.json").is_file() else ""
            raise ConfigError(
                f"{key} is not a model directory{hint}: give a save_pretrained folder (config.json, *.safetensors, "
                "tokenizer files), a checkpoint step folder (state.json, agents/) or a training run folder"
            )
        found += items
    if agents:
        available = sorted({c.agent for c in found})
        missing = [a for a in agents if a not in available]
        if missing:
            raise ConfigError(f"agents={list(agents)}: {missing} not among the checkpoints' agents {available}")
        found = [c for c in found if c.agent in agents]
    return found


def load_checkpoint_agent(
    ckpt: AgentCheckpoint,
    device: str = "cpu",
    max_batch_size: int = 64,
    max_prompt_tokens: int = 1024,
    chat_template: bool = True,
    dtype: str = "float32",
) -> Agent:
    """An evaluation-only Agent (no optimizer, no reference) from a model folder; ConfigError when it cannot load.

    Tokenizers saved as plain `PreTrainedTokenizerFast` (the tiny agents') load as that class, never through
    AutoTokenizer, which can silently swap a custom tokenizer (shared/docs/dependencies.md); others use AutoTokenizer.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

    from hacrl_exp.agents.agent import DTYPES, Agent
    from hacrl_exp.agents.stops import generation_eos, stop_token_ids
    from hacrl_exp.rollout.hf import HFRolloutEngine

    try:
        config = json.loads((ckpt.path / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        config = {}
    try:
        if config.get("tokenizer_class") in ("PreTrainedTokenizerFast", "TokenizersBackend"):
            tokenizer = PreTrainedTokenizerFast.from_pretrained(ckpt.path, padding_side="left")
        else:
            tokenizer = AutoTokenizer.from_pretrained(ckpt.path, padding_side="left", trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(
            ckpt.path, dtype=DTYPES.get(dtype, torch.float32), trust_remote_code=False, use_safetensors=True
        )
    except (OSError, ValueError, KeyError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ConfigError(f"checkpoint {ckpt.path} could not be loaded as a model ({first})") from None
    if tokenizer.eos_token_id is None:
        raise ConfigError(f"checkpoint {ckpt.path}: its tokenizer has no EOS token, so generation cannot stop")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device).eval()
    use_chat = chat_template and getattr(tokenizer, "chat_template", None) is not None
    stops = stop_token_ids(tokenizer, generation_eos(model), use_chat)  # its EOS, generation config's, end of turn
    engine = HFRolloutEngine(model, tokenizer, max_batch_size=max_batch_size, stop_ids=stops)
    return Agent(ckpt.agent, model, tokenizer, engine, None, None, use_chat, max_prompt_tokens)
