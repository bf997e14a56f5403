"""An agent: a causal LM with its own tokenizer, prompt rendering, optimizer, rollout engine and reference.

Tiny agents are built from a transformers config with a tokenizer made locally (`agents.tiny`) and
warm-started on the task; real agents load from a hub id or a folder. Remote code runs only when the
config sets model.trust_remote_code.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from hacrl_exp.config.schema import AgentConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.rollout.hf import HFRolloutEngine

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class Agent:
    name: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    engine: HFRolloutEngine
    optimizer: torch.optim.Optimizer | None
    """None for a frozen agent."""
    reference: PreTrainedModel | None
    """Frozen initial model for the KL term; None when algorithm.kl_coef is 0."""
    use_chat_template: bool
    max_prompt_tokens: int

    @property
    def pad_id(self) -> int:
        return self.engine.pad_id

    @property
    def frozen(self) -> bool:
        return self.optimizer is None

    def prompt_ids(self, text: str) -> list[int]:
        """Token ids of a user prompt: the chat template (generation prompt, no thinking) or plain text.

        Left-truncated to max_prompt_tokens, keeping the end where the question is asked.
        """
        if self.use_chat_template:
            ids = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True, enable_thinking=False
            )
            ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        else:
            ids = self.tokenizer(text, add_special_tokens=True)["input_ids"]
        return list(ids)[-self.max_prompt_tokens :]


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
    except OSError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{key}.model.path={cfg.model.path!r} could not be loaded ({first})") from None
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
) -> Agent:
    """Wrap a built model: optimizer (unless frozen), rollout engine, and a frozen reference when KL is on."""
    if tokenizer.eos_token_id is None:
        raise ConfigError(f"agents.members.{name}.tokenizer has no EOS token; use a tokenizer that defines eos_token")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device)
    model.eval()  # no dropout: scoring and training see the same function (tiny configs have dropout 0)
    reference = None
    if kl_coef > 0 and not cfg.frozen:
        reference = copy.deepcopy(model).requires_grad_(False)
    optimizer = None
    if not cfg.frozen:
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    else:
        model.requires_grad_(False)
    use_chat = cfg.chat_template and getattr(tokenizer, "chat_template", None) is not None
    engine = HFRolloutEngine(model, tokenizer, max_batch_size=max_batch_size)
    return Agent(name, model, tokenizer, engine, optimizer, reference, use_chat, max_prompt_tokens)


def save_agent(agent: Agent, folder: Path) -> None:
    """Hugging Face `save_pretrained` layout (safetensors) of the model and its tokenizer."""
    agent.model.save_pretrained(folder, safe_serialization=True)
    agent.tokenizer.save_pretrained(folder)
