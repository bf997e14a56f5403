"""What a rehearsal must know of a checkpoint whose weights it cannot load: one table, each fact with its source.

A rehearsal builds, for each pretrained agent, a random-initialised model of the checkpoint's architecture class with
its real vocabulary size and special tokens. Where the checkpoint's own files can be read (a local model folder, or
the hub / the local Hugging Face cache), they win over this table (`hacrl_exp.rehearsal.sources`). Sizes (vocabulary
rows, positions, tied head) come from the planner's table, `agents.model_shapes.KNOWN_MODELS`.

- Qwen/Qwen3-{1.7B,4B,8B}-Base: Qwen3ForCausalLM, qwen3 family; eos <|endoftext|>, pad <|endoftext|>; its
  generation_config stops at <|endoftext|>; chat template: the family file's.
- Qwen/Qwen3-4B: Qwen3ForCausalLM, qwen3; eos <|im_end|>, pad <|endoftext|>; stops at <|im_end|>, <|endoftext|>;
  chat template: the family file's (the shared qwen3 folder is this post-trained, hybrid-thinking one).
- Qwen/Qwen3-4B-Instruct-2507: as Qwen3-4B, but its template writes no empty <think></think> block.
- meta-llama/Llama-3.2-3B-Instruct: LlamaForCausalLM, llama3; eos <|eot_id|>, no pad, bos <|begin_of_text|>; stops
  at 128001, 128008, 128009 (<|end_of_text|>, <|eom_id|>, <|eot_id|>; the Llama 3 family file still calls 128008
  <|reserved_special_token_4|>); its template opens with a system header the family file lacks.

Sources: each checkpoint's files on huggingface.co/<id> as published in 2025 (tokenizer_config.json: eos_token,
pad_token, chat_template; config.json: architectures; generation_config.json: eos_token_id, sampling defaults). No hub
is reachable from where this table was written, so two facts were checked against other sources: the eos of the Base
and Llama checkpoints against ../shared/tokenizers/README.md ("Qwen3-*-Base ends with <|endoftext|>",
"Llama-3.2-*-Instruct ends turns with <|eot_id|>"), and Llama-3.2-Instruct's ids against vLLM's tokenizer test (eos
128009; generation_config eos 128001, 128008, 128009). The rest, the Base checkpoints shipping the post-trained chat
template among it, is the hub files as known when the table was written: the checkpoint's own files (a folder, the hub,
the Hugging Face cache) settle it, and a rehearsal that can read them uses them instead. The family folders of
../shared/tokenizers are Qwen3's post-trained (hybrid thinking) files and Llama 3's original ones (eos
<|end_of_text|>, no pad, the Llama 3 template).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class CheckpointFacts:
    """A checkpoint's class and special tokens, as its own files state them."""

    architecture: str
    """transformers class named by config.json's `architectures`, e.g. Qwen3ForCausalLM."""
    model_type: str
    family: str
    """Tokenizer family: the folder name under rehearsal.tokenizers (qwen3, llama3)."""
    eos: str
    """tokenizer_config.json's eos_token: the token the hf rollout stops at."""
    pad: str | None
    """tokenizer_config.json's pad_token; None: the checkpoint has none (the run then pads with eos)."""
    bos: str | None = None
    """tokenizer_config.json's bos_token (the Llama 3 template writes it)."""
    stops: tuple[int, ...] = ()
    """generation_config.json's eos_token_id: the ids where the checkpoint's own generation config stops."""
    generation: dict[str, Any] = field(default_factory=dict)
    """generation_config.json's other settings (sampling defaults), which `generate` merges into unset fields."""
    template_note: str | None = None
    """How the checkpoint's own chat template differs from its family file's; None: it is the same."""
    source: str = "hacrl_exp.rehearsal.checkpoints.KNOWN_CHECKPOINTS"
    """Where the special tokens were read."""


_QWEN3_BASE = CheckpointFacts(
    "Qwen3ForCausalLM",
    "qwen3",
    "qwen3",
    eos="<|endoftext|>",
    pad="<|endoftext|>",
    stops=(151643,),
    generation={"do_sample": False, "max_new_tokens": 2048},
)
_QWEN3_CHAT = CheckpointFacts(
    "Qwen3ForCausalLM",
    "qwen3",
    "qwen3",
    eos="<|im_end|>",
    pad="<|endoftext|>",
    stops=(151645, 151643),
    generation={"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95},
)
KNOWN_CHECKPOINTS: dict[str, CheckpointFacts] = {
    "Qwen/Qwen3-1.7B-Base": _QWEN3_BASE,
    "Qwen/Qwen3-4B-Base": _QWEN3_BASE,
    "Qwen/Qwen3-8B-Base": _QWEN3_BASE,
    "Qwen/Qwen3-4B": _QWEN3_CHAT,
    "Qwen/Qwen3-4B-Instruct-2507": replace(
        _QWEN3_CHAT,
        generation={"do_sample": True, "temperature": 0.7, "top_k": 20, "top_p": 0.8},
        template_note="the checkpoint's own (non-thinking only) opens the answer without the empty <think></think> "
        "block the family file writes under enable_thinking=False: its real prompts are 4 tokens shorter",
    ),
    "meta-llama/Llama-3.2-3B-Instruct": CheckpointFacts(
        "LlamaForCausalLM", "llama", "llama3", eos="<|eot_id|>", pad=None, bos="<|begin_of_text|>",
        stops=(128001, 128008, 128009),
        generation={"do_sample": True, "temperature": 0.6, "top_p": 0.9},
        template_note="the checkpoint's own opens with a system header (Cutting Knowledge Date, Today Date: the day "
        "of the run) that the family file (Llama 3's) lacks: its real prompts are 25 tokens longer",
    ),
}  # fmt: skip
"""Special tokens and classes of the checkpoints the paper presets name (module docstring: sources)."""

FAMILIES = {"qwen3": "qwen3", "qwen2": "qwen3", "llama": "llama3"}
"""config.json model_type → tokenizer family folder (Qwen2 and Qwen3 share one vocabulary)."""
