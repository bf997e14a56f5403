"""The shapes of an agent's model, for the resource planner (agents.memory_plan): no weights are loaded.

A shape lists every parameter tensor of the architecture as its Hugging Face implementation builds it, so the
parameter count is exact, not a 12·L·h² rule of thumb. Sources, in order: a tiny agent's config; a pretrained
model's config.json on disk (a folder, or the local Hugging Face cache; never the network); the config.json keys
of the checkpoints the paper presets use (`agents.hub_checkpoints.KNOWN_CHECKPOINTS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hacrl_exp.agents.hub_checkpoints import KNOWN_CHECKPOINTS
from hacrl_exp.config.schema import AgentConfig
from hacrl_exp.errors import ConfigError

CHAR_VOCAB = 128
"""A char tokenizer's vocabulary (the task's alphabet plus specials) is below this."""

LLAMA_LIKE = {"llama": False, "qwen3": True, "qwen2": False, "mistral": False}
"""model_type → has per-head q/k RMSNorm (Qwen3). All: RMSNorm, SwiGLU MLP, grouped-query attention, rotary."""


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only LM's sizes. family: 'llama' (RMSNorm, SwiGLU, GQA; qk_norm for Qwen3), 'opt' or 'gpt2'
    (LayerNorm with bias, GeLU MLP, biased projections, learned positions); source says where the numbers came from."""

    family: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    tied: bool
    max_positions: int
    qk_norm: bool = False
    source: str = ""

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def linears(self) -> list[tuple[str, int, int]]:
        """(name, in, out) of every linear projection of one decoder layer (the LoRA targets)."""
        h, i = self.hidden, self.intermediate
        if self.family == "llama":
            return [("q_proj", h, self.q_dim), ("k_proj", h, self.kv_dim), ("v_proj", h, self.kv_dim),
                    ("o_proj", self.q_dim, h), ("gate_proj", h, i), ("up_proj", h, i), ("down_proj", i, h)]  # fmt: skip
        if self.family == "opt":
            return [("q_proj", h, h), ("k_proj", h, h), ("v_proj", h, h), ("out_proj", h, h),
                    ("fc1", h, i), ("fc2", i, h)]  # fmt: skip
        return [("c_attn", h, 3 * h), ("attn.c_proj", h, h), ("c_fc", h, i), ("mlp.c_proj", i, h)]

    def layer_tensors(self) -> list[int]:
        """Element count of every parameter tensor of one decoder layer."""
        h = self.hidden
        if self.family == "llama":
            norms = [h, h] + ([self.head_dim, self.head_dim] if self.qk_norm else [])
            return [n_in * n_out for _, n_in, n_out in self.linears()] + norms
        weights_and_biases = [t for _, n_in, n_out in self.linears() for t in (n_in * n_out, n_out)]
        return weights_and_biases + [h, h, h, h]  # two LayerNorms, weight and bias each

    def outer_tensors(self) -> list[int]:
        """Element count of every parameter tensor outside the decoder layers: embeddings, final norm, output head."""
        h, v = self.hidden, self.vocab
        head = [] if self.tied else [v * h]
        if self.family == "llama":
            return [v * h, h, *head]
        positions = self.max_positions + 2 if self.family == "opt" else self.max_positions  # OPT offsets by 2
        return [v * h, positions * h, h, h, *head]

    @property
    def layer_params(self) -> int:
        return sum(self.layer_tensors())

    @property
    def outer_params(self) -> int:
        return sum(self.outer_tensors())

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.outer_params

    @property
    def tensors(self) -> int:
        return self.layers * len(self.layer_tensors()) + len(self.outer_tensors())


def shape_from_hf_config(hf: Any, source: str = "") -> ModelShape:
    """The shape of a transformers config (or any object with its attribute names: a config.json's keys)."""
    get = hf.get if isinstance(hf, dict) else lambda k, d=None: getattr(hf, k, d)
    kind = get("model_type")
    if kind in LLAMA_LIKE:
        heads = get("num_attention_heads")
        return ModelShape(
            family="llama",
            vocab=get("vocab_size"),
            hidden=get("hidden_size"),
            layers=get("num_hidden_layers"),
            heads=heads,
            kv_heads=get("num_key_value_heads") or heads,
            head_dim=get("head_dim") or get("hidden_size") // heads,
            intermediate=get("intermediate_size"),
            tied=bool(get("tie_word_embeddings", False)),
            max_positions=get("max_position_embeddings"),
            qk_norm=LLAMA_LIKE[kind],
            source=source,
        )
    if kind in ("opt", "gpt2"):
        opt = kind == "opt"
        hidden = get("hidden_size") if opt else get("n_embd")
        heads = get("num_attention_heads") if opt else get("n_head")
        return ModelShape(
            family=kind,
            vocab=get("vocab_size"),
            hidden=hidden,
            layers=get("num_hidden_layers") if opt else get("n_layer"),
            heads=heads,
            kv_heads=heads,
            head_dim=hidden // heads,
            intermediate=(get("ffn_dim") if opt else get("n_inner")) or 4 * hidden,
            tied=bool(get("tie_word_embeddings", True)),
            max_positions=get("max_position_embeddings") if opt else get("n_positions"),
            source=source,
        )
    raise ValueError(f"model_type={kind!r} is not known to the planner; known: {[*LLAMA_LIKE, 'opt', 'gpt2']}")


def tiny_shape(agent: AgentConfig, vocab: int | None = None) -> ModelShape:
    """A tiny agent's shape from its config (agents.tiny.build_tiny_model's arithmetic). vocab: the tokenizer's
    length when known; else an upper bound (a char tokenizer's alphabet, a BPE tokenizer's vocab_size)."""
    m = agent.model
    if vocab is None:
        vocab = agent.tokenizer.vocab_size if agent.tokenizer.kind == "bpe" else CHAR_VOCAB
    config = {"model_type": m.arch, "vocab_size": vocab, "tie_word_embeddings": True}
    names = {"hidden_size": m.hidden_size, "num_hidden_layers": m.num_layers, "num_attention_heads": m.num_heads,
             "intermediate_size": 4 * m.hidden_size, "max_position_embeddings": m.max_positions}  # fmt: skip
    if m.arch == "gpt2":
        names = {"n_embd": m.hidden_size, "n_layer": m.num_layers, "n_head": m.num_heads, "n_inner": 4 * m.hidden_size,
                 "n_positions": m.max_positions}  # fmt: skip
    if m.arch == "opt":
        names["ffn_dim"] = names.pop("intermediate_size")
    return shape_from_hf_config({**config, **names}, source="the agent's config (tiny)")


def agent_shape(name: str, agent: AgentConfig, vocab: int | None = None) -> ModelShape:
    """The shape of one agent: tiny from its config; pretrained from a local config.json, else the
    checkpoint's row of `KNOWN_CHECKPOINTS`."""
    if agent.model.source != "pretrained":
        return tiny_shape(agent, vocab)
    path = agent.model.path or ""
    from transformers import AutoConfig  # heavy: only for pretrained agents

    try:
        hf, source = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False), "local"
    except (OSError, ValueError):  # not on disk (never downloaded), or its code is not in transformers
        known = KNOWN_CHECKPOINTS.get(path)
        hf, source = (known.config if known else None), "built-in table"
    if hf is not None:
        try:
            return shape_from_hf_config(hf, source=f"{path} config.json ({source})")
        except ValueError as exc:
            raise ConfigError(f"agents.members.{name}.model.path={path!r}: {exc}") from None
    raise ConfigError(
        f"agents.members.{name}.model.path={path!r}: no config.json on disk and not in the table of hub checkpoints "
        f"{sorted(KNOWN_CHECKPOINTS)}; download it first (huggingface-cli download {path} config.json)"
    )
