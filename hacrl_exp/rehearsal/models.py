"""A random-initialised stand-in for a checkpoint: its architecture class, vocabulary rows, positions, tied head and
special-token ids, at a tiny width and depth, saved as a Hugging Face folder the run loads like the real one.

Only the weights and the sizes of the hidden layers are not the checkpoint's: `save_stand_in` writes config.json,
generation_config.json, model.safetensors and the tokenizer files (sources.write_tokenizer) into one folder, which the
rehearsal then names as the agent's model.path, so `agents.agent.load_pretrained` builds it as it would the real one.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig, PreTrainedTokenizerBase

from hacrl_exp.config.schema import RehearsalConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.rehearsal.sources import AgentSource

SIZE_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
             "head_dim")  # fmt: skip
DROPPED_KEYS = ("layer_types", "max_window_layers", "torch_dtype", "dtype", "transformers_version", "_name_or_path",
                "auto_map", "quantization_config")  # fmt: skip
"""config.json keys tied to the real depth or to loading the real weights, left to the class's defaults."""
HEADS = 2


def stand_in_config(source: AgentSource, tokenizer: PreTrainedTokenizerBase, settings: RehearsalConfig):
    """The checkpoint's config with hidden sizes cut to rehearsal.hidden_size × rehearsal.num_layers (2 query heads,
    1 key/value head: grouped-query attention stays on) and the tokenizer's special-token ids."""
    keys = {k: v for k, v in source.config.items() if k not in DROPPED_KEYS and k != "model_type"}
    width = settings.hidden_size
    sizes = dict(zip(SIZE_KEYS, (width, 2 * width, settings.num_layers, HEADS, 1, width // HEADS)))
    ids = {"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    if tokenizer.bos_token_id is not None or "bos_token_id" not in keys:
        ids["bos_token_id"] = tokenizer.bos_token_id
    stops = list(source.stops)
    if stops:
        ids["eos_token_id"] = stops if len(stops) > 1 else stops[0]
    try:
        return AutoConfig.for_model(source.config["model_type"], **{**keys, **sizes, **ids})
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"{source.key}.model.path={source.checkpoint!r}: no transformers config ({exc})") from None


def build_stand_in(source: AgentSource, tokenizer: PreTrainedTokenizerBase, settings: RehearsalConfig, seed: int):
    """The random model: the class config.json's `architectures` names, checked against what transformers builds."""
    config = stand_in_config(source, tokenizer, settings)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    wanted = (source.config.get("architectures") or [type(model).__name__])[0]
    if type(model).__name__ != wanted:
        raise ConfigError(
            f"{source.key}.model.path={source.checkpoint!r}: config.json names {wanted}, but transformers builds "
            f"{type(model).__name__} for model_type={config.model_type!r}; the run would load another class"
        )
    return model


def save_stand_in(source: AgentSource, tokenizer, settings: RehearsalConfig, seed: int, folder: Path) -> str:
    """Build and save the stand-in into `folder` (its tokenizer files are already there); returns one line."""
    model = build_stand_in(source, tokenizer, settings, seed)
    model.save_pretrained(folder, safe_serialization=True)
    generation = {k: v for k, v in source.generation.items() if k != "transformers_version"}
    generation.update(
        eos_token_id=model.config.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=model.config.bos_token_id,
    )
    GenerationConfig(**generation).save_pretrained(folder)
    (folder / "rehearsal.json").write_text(
        json.dumps(dict(checkpoint=source.checkpoint, config=source.config_from, tokenizer=source.tokenizer_from))
    )
    params = sum(p.numel() for p in model.parameters())
    return (
        f"{type(model).__name__}: hidden {settings.hidden_size}, {settings.num_layers} layers, {params:,} parameters, "
        f"vocab_size {model.config.vocab_size:,}, positions {getattr(model.config, 'max_position_embeddings', '?')}, "
        f"tied head {model.config.tie_word_embeddings}, eos {model.config.eos_token_id}, "
        f"bos {model.config.bos_token_id}"
    )
