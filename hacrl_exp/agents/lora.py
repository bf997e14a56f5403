"""LoRA for large agents (peft): only low-rank adapters train, the base weights stay frozen.

Checkpoint layout of a LoRA agent (agents/<name>/ in a checkpoint): the merged model, W + (alpha/r)·B·A, saved
with save_pretrained (safetensors), so evaluation, vLLM and any Hugging Face tool load it as a plain model; and
adapter/, peft's own save_pretrained (adapter_config.json + adapter_model.safetensors), which resume loads back
into the rebuilt base (the base is rebuilt from the config, so resume is exact) and PeftModel.from_pretrained
can load onto the base.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch
from transformers import PreTrainedModel

from hacrl_exp.config.schema import LoraConfig
from hacrl_exp.errors import ConfigError

ADAPTER_DIR = "adapter"


def is_lora(model) -> bool:
    """True for a peft model (one built by `apply_lora`)."""
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def apply_lora(model: PreTrainedModel, cfg: LoraConfig, key: str = "lora", seed: int = 0):
    """Wrap `model` with trainable LoRA adapters on cfg.target_modules; every other weight is frozen.

    Adapters start at B = 0, so the wrapped model computes exactly the base model's function at step 0; A's random
    initialisation depends on `seed` only (the global torch RNG is left untouched). Adapter weights are float32
    even on bf16/fp16 bases (peft's autocast_adapter_dtype).
    """
    try:
        import peft
    except ImportError:
        raise ConfigError(f'{key}.r={cfg.r} needs peft, which is not installed: pip install -e ".[lora]"') from None
    targets = "all-linear" if list(cfg.target_modules) == ["all-linear"] else list(cfg.target_modules)
    config = peft.LoraConfig(
        r=cfg.r,
        lora_alpha=cfg.alpha,
        lora_dropout=0.0,  # agents train in eval mode (no dropout anywhere), see agents.precision
        target_modules=targets,
        bias="none",
        fan_in_fan_out=model.config.model_type == "gpt2",  # GPT-2's Conv1D stores weights transposed
    )
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return peft.get_peft_model(model, config)
    except ValueError as exc:  # e.g. target modules not found in the model
        raise ConfigError(f"{key}.target_modules={list(cfg.target_modules)}: {str(exc).splitlines()[0]}") from None


@torch.no_grad()
def merged_weights(model) -> Iterator[tuple[str, torch.Tensor]]:
    """The model's weights under their Hugging Face names, each LoRA delta folded in: W + (alpha/r)·B·A.

    One tensor at a time (a vLLM engine loads them as they come); the training model is not modified. A model
    without LoRA yields its state dict as is.
    """
    if not is_lora(model):
        yield from model.state_dict().items()
        return
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    layers = {f"{name}.base_layer.weight": m for name, m in base.named_modules() if isinstance(m, LoraLayer)}
    for key, value in base.state_dict().items():
        if ".lora_" in key:
            continue
        layer = layers.get(key)
        if layer is not None:
            delta = sum(layer.get_delta_weight(a).float() for a in layer.active_adapters if a in layer.lora_A)
            value = (value.float() + delta).to(value.dtype)
        yield key.replace(".base_layer.", "."), value


def save_lora_agent(model, folder: Path) -> None:
    """The merged model at `folder` (save_pretrained, safetensors) and the adapter at folder/adapter."""
    base = model.get_base_model()
    base.save_pretrained(folder, state_dict=dict(merged_weights(model)), safe_serialization=True)
    model.save_pretrained(Path(folder) / ADAPTER_DIR, safe_serialization=True)


def load_adapter(model, folder: Path) -> None:
    """Load adapter weights saved by `save_lora_agent` (folder = the agent's checkpoint folder) into `model`."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    device = next(model.parameters()).device
    weights = load_file(Path(folder) / ADAPTER_DIR / "adapter_model.safetensors", device=str(device))
    result = set_peft_model_state_dict(model, weights)
    if result.unexpected_keys:
        raise RuntimeError(f"adapter in {folder} does not match the agent: unexpected {result.unexpected_keys[:3]}")


class AdapterDisabled(torch.nn.Module):
    """The frozen base under a LoRA model, for the KL reference, without a second copy of the weights.

    Its forward runs the wrapped model with its adapters switched off: the initial model exactly, since B = 0 at
    the start. Never optimize or freeze it: its parameters are the agent's own.
    """

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args, **kwargs):
        with self.model.disable_adapter():
            return self.model(*args, **kwargs)
