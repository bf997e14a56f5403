"""The rollout-engine interface: prompts in, sampled responses (text and token ids) out.

Engines only sample. The source's old log-probs are recomputed by the training model afterwards
(spec §1.2), so an engine's own sampling log-probs are never used in the loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from hacrl_exp.config.schema import RolloutConfig


@dataclass(frozen=True)
class SamplingSettings:
    """Sampling for one generate call. temperature 0 (or do_sample False) means greedy."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    """-1 disables top-k, as verl and vLLM (transformers' own default would be 50)."""
    max_new_tokens: int = 48
    do_sample: bool = True

    @classmethod
    def of(cls, rollout: RolloutConfig) -> SamplingSettings:
        """The training rollouts' sampling (rollout.temperature, top_p, max_new_tokens): the one object that both
        generates a step's responses and sets the temperature their log-probs are scored at, old and new."""
        return cls(rollout.temperature, rollout.top_p, max_new_tokens=rollout.max_new_tokens)

    @property
    def greedy(self) -> bool:
        """Decode greedily: do_sample False, or temperature 0 (what every backend maps to greedy)."""
        return not self.do_sample or self.temperature == 0


@dataclass
class Rollouts:
    """n responses per prompt, row r = prompt r // n. Response ids exclude a trailing EOS (spec §1.3, C1)."""

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    texts: list[str]
    finished: list[bool]
    """Whether the response ended with EOS (not cut by max_new_tokens)."""

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def num_tokens(self) -> int:
        return sum(len(r) for r in self.response_ids)


class RolloutEngine(Protocol):
    """Generates responses for one agent. Implementations: `hf` (transformers generate), `vllm` (rollout/vllm.py)."""

    pad_id: int
    """The agent's padding token id (its EOS when the tokenizer has no pad token)."""
    stop_ids: tuple[int, ...]
    """The ids generation stops at and responses are cut at, its EOS first (agents.stops.stop_token_ids)."""

    def generate(self, prompt_ids: Sequence[list[int]], n: int, sampling: SamplingSettings) -> Rollouts:
        """Sample n responses for each prompt (given as token ids in the agent's own tokenizer)."""
        ...


def pad_and_stop_ids(tokenizer, stop_ids: Sequence[int] = ()) -> tuple[int, tuple[int, ...]]:
    """A rollout engine's (pad id, stop ids): the tokenizer's pad token (its EOS when it has none), and its EOS followed
    by `stop_ids` (agents.stops.stop_token_ids), each once. ValueError for a tokenizer without an EOS token."""
    if tokenizer.eos_token_id is None:
        raise ValueError("tokenizer has no EOS token; set tokenizer.eos_token")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return pad_id, tuple(dict.fromkeys([tokenizer.eos_token_id, *stop_ids]))


def compute_device(model: torch.nn.Module) -> torch.device:
    """The device a forward of `model` computes on, where its inputs go: its parameters' device, except for an
    FSDP2 module with CPU offload (hacrl_exp.agents.sharding), whose shards stay in host RAM between forwards and are
    gathered onto its device mesh's accelerator (the process's current one) for each forward."""
    param = next(model.parameters())
    mesh = getattr(param, "device_mesh", None)  # set on a DTensor: an FSDP2-sharded parameter
    if mesh is None or mesh.device_type == param.device.type:
        return param.device
    return torch.device(mesh.device_type, torch.get_device_module(mesh.device_type).current_device())
