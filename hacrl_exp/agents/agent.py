"""An agent: a causal LM with its own tokenizer, prompt rendering, optimizer, rollout engine and reference.

Tiny agents are built from a transformers config with a tokenizer made locally (`agents.tiny`) and
warm-started on the task; real agents load from a hub id or a folder. Remote code runs only when the
config sets model.trust_remote_code.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from hacrl_exp.agents.lora import AdapterDisabled, apply_lora, is_lora, merged_weights, save_lora_agent
from hacrl_exp.agents.precision import (
    DTYPES,
    cast_parameters,
    enable_gradient_checkpointing,
    make_optimizer,
    prepare_model,
    uses_master_weights,
)
from hacrl_exp.agents.stops import generation_eos, stop_token_ids
from hacrl_exp.config.schema import AgentConfig, RolloutConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.rollout.base import RolloutEngine
from hacrl_exp.rollout.hf import HFRolloutEngine
from hacrl_exp.rollout.vllm import Layout, VLLMRolloutEngine

__all__ = [
    "DTYPES",
    "Agent",
    "build_agent",
    "load_pretrained",
    "prompt_token_ids",
    "save_agent",
    "uses_chat_template",
]


@dataclass
class Agent:
    name: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    engine: RolloutEngine
    optimizer: torch.optim.Optimizer | None
    """None for a frozen agent."""
    reference: torch.nn.Module | None
    """Frozen initial model for the KL term (a LoRA agent: its base, adapters off); None when algorithm.kl_coef is 0."""
    use_chat_template: bool
    max_prompt_tokens: int
    warm_start: dict[str, float] = field(default_factory=dict)
    """What the warm start did (a tiny agent's `warm_start/*` metrics: steps run, held-out accuracy reached); {}
    without one."""

    @property
    def pad_id(self) -> int:
        return self.engine.pad_id

    @property
    def stop_ids(self) -> tuple[int, ...]:
        """The ids its rollouts stop at, its EOS first (agents.stops.stop_token_ids)."""
        return self.engine.stop_ids

    @property
    def frozen(self) -> bool:
        return self.optimizer is None

    def prompt_ids(self, text: str) -> list[int]:
        """Token ids of a user prompt: the chat template (generation prompt, no thinking) or plain text.

        Left-truncated to max_prompt_tokens, keeping the end where the question is asked.
        """
        return prompt_token_ids(self.tokenizer, [text], self.use_chat_template)[0][-self.max_prompt_tokens :]


def uses_chat_template(cfg: AgentConfig, tokenizer: PreTrainedTokenizerBase) -> bool:
    """Prompts go through the chat template: the agent asks for it (chat_template) and the tokenizer has one."""
    return cfg.chat_template and getattr(tokenizer, "chat_template", None) is not None


def prompt_token_ids(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], chat_template: bool) -> list[list[int]]:
    """Each user prompt's token ids, untruncated: the chat template with the generation prompt and thinking off
    (enable_thinking=False, spec §4), or the plain text with the tokenizer's own special tokens. One batched call."""
    if chat_template:
        out = tokenizer.apply_chat_template(
            [[{"role": "user", "content": text}] for text in texts],
            add_generation_prompt=True,
            tokenize=True,
            enable_thinking=False,
        )
    else:
        out = tokenizer(list(texts), add_special_tokens=True)
    ids = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
    return [list(row) for row in ids]


def load_pretrained(name: str, cfg: AgentConfig) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a real model and tokenizer from a hub id or folder, safetensors only, remote code only if asked."""
    key = f"agents.members.{name}"
    tokenizer_path = cfg.tokenizer.path or cfg.model.path
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            tokenizer_path, trust_remote_code=cfg.model.trust_remote_code, padding_side="left"
        )
        model = AutoModelForCausalLM.from_pretrained(
            cfg.model.path,
            dtype=DTYPES[cfg.model.dtype],
            trust_remote_code=cfg.model.trust_remote_code,
            use_safetensors=True,
        )
    except (OSError, ValueError) as exc:  # ValueError: e.g. a model that ships its own code, remote code off
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        remote = "trust_remote_code" in str(exc)
        fix = f"; set {key}.model.trust_remote_code=true only if you trust its code" if remote else ""
        raise ConfigError(f"{key}.model.path={cfg.model.path!r} could not be loaded ({first}){fix}") from None
    return model, tokenizer


def build_agent(
    name: str,
    cfg: AgentConfig,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    device: torch.device,
    kl_coef: float,
    max_prompt_tokens: int,
    max_batch_size: int,
    rollout: RolloutConfig | None = None,
    seed: int = 0,
) -> Agent:
    """Wrap a built model: dtype, device and mixed precision (agents.precision), LoRA adapters, gradient
    checkpointing, optimizer over the trainable weights (unless frozen; float32 masters of bf16 weights under
    model.mixed_precision=master), rollout engine (rollout.backend, default hf), and a frozen reference when KL is
    on. `seed` fixes the LoRA adapters' initialisation and the vLLM engine's sampling."""
    key = f"agents.members.{name}"
    if tokenizer.eos_token_id is None:
        raise ConfigError(f"{key}.tokenizer has no EOS token; use a tokenizer that defines eos_token")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = prepare_model(model, cfg.model, device)
    lora = cfg.lora.r > 0 and not cfg.frozen
    reference = None
    if kl_coef > 0 and not cfg.frozen and not lora:
        reference = copy.deepcopy(model).requires_grad_(False)
    if lora:
        model = apply_lora(model, cfg.lora, f"{key}.lora", seed=seed)
        reference = AdapterDisabled(model).eval() if kl_coef > 0 else None
    if cfg.model.gradient_checkpointing and not cfg.frozen:
        try:
            enable_gradient_checkpointing(model)
        except ValueError as exc:
            raise ConfigError(f"{key}.model.gradient_checkpointing=true: {exc}; set it to false") from None
    optimizer = None
    if not cfg.frozen:
        optimizer = make_optimizer(model, cfg.model, cfg.lr, cfg.weight_decay)
    else:
        model.requires_grad_(False)
    if uses_master_weights(cfg.model):  # bf16 weights for forward and backward; float32 masters in the optimizer
        for module in (model, reference if isinstance(reference, torch.nn.Module) else None):
            if module is not None:
                cast_parameters(module, DTYPES[cfg.model.compute_dtype])
    engine = make_engine(cfg, model, tokenizer, optimizer, rollout, max_batch_size, seed)
    use_chat = uses_chat_template(cfg, tokenizer)
    return Agent(name, model, tokenizer, engine, optimizer, reference, use_chat, max_prompt_tokens)


def make_engine(
    cfg: AgentConfig,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    optimizer: torch.optim.Optimizer | None,
    rollout: RolloutConfig | None,
    max_batch_size: int,
    seed: int,
    weights: Callable[[], Iterable[tuple[str, torch.Tensor]]] | None = None,
    layout: Layout | None = None,
) -> RolloutEngine:
    """The agent's rollout engine (rollout.backend, default hf) over its training model, stopping at the agent's
    stop ids (agents.stops.stop_token_ids: its EOS, its generation config's, its chat template's end of turn).

    vLLM: its weights follow the model through `weights` (default `merged_weights`: LoRA folded in; a sharded agent
    passes `agents.sharding.full_weights`), reloaded after each step of `optimizer`; `layout` places a sharded
    agent's rank in its data-parallel × tensor-parallel engines (rollout.vllm.Layout; default W = 1)."""
    stops = stop_token_ids(tokenizer, generation_eos(model), uses_chat_template(cfg, tokenizer))
    if rollout is not None and rollout.backend == "vllm":
        return VLLMRolloutEngine(
            model,
            tokenizer,
            rollout.vllm,
            dtype=cfg.model.compute_dtype or cfg.model.dtype,
            seed=seed,
            optimizer=optimizer,
            weights=weights or (lambda: merged_weights(model)),  # the engine does not import agents
            layout=layout or Layout(),
            stop_ids=stops,
        )
    on_cuda = next(model.parameters()).device.type == "cuda"
    sharded = cfg.world_size > 1 or cfg.fsdp.offload  # FSDP gathers its weights in bf16 itself (agents.sharding)
    copy_dtype = DTYPES[cfg.model.compute_dtype] if cfg.model.compute_dtype and on_cuda and not sharded else None
    return HFRolloutEngine(
        model,
        tokenizer,
        max_batch_size=max_batch_size,
        sampler=rollout.sampler if rollout is not None else "counter",
        generation_dtype=copy_dtype,  # a bf16 copy of float32 weights (none when the weights are bf16 already)
        optimizer=optimizer,
        cache=rollout.hf_cache if rollout is not None else "dynamic",
        sort_rows=on_cuda,  # on CPU the batches stay as they were: the default run's samples do not move
        stop_ids=stops,
    )


def save_agent(agent: Agent, folder: Path) -> None:
    """Hugging Face `save_pretrained` layout (safetensors) of the model and its tokenizer.

    A LoRA agent saves its merged weights there and its adapter in folder/adapter (agents.lora).
    """
    if is_lora(agent.model):
        save_lora_agent(agent.model, folder)
    else:
        agent.model.save_pretrained(folder, safe_serialization=True)
    save_tokenizer(agent.tokenizer, folder)


_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def save_tokenizer(tokenizer: PreTrainedTokenizerBase, folder: Path) -> None:
    """tokenizer.save_pretrained(folder). The Rust `tokenizers` library reports a failed write of tokenizer.json as a
    bare Exception ('No space left on device (os error 28)'): it is raised here as the OSError it is, naming the file,
    so a full disk reads as one line (hacrl_exp.paths.output_error) and not as a traceback."""
    try:
        tokenizer.save_pretrained(folder)
    except OSError:
        raise
    except Exception as exc:
        code = _OS_ERROR.search(str(exc))
        if code is None:
            raise
        raise OSError(int(code.group(1)), str(exc), str(Path(folder) / "tokenizer.json")) from exc
