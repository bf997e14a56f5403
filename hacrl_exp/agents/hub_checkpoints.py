"""The hub checkpoints the paper presets name: one table of what their own files state, each fact with its source.

Read by the resource planner (`agents.model_shapes`: the sizes, when a checkpoint's config.json is not on disk) and
by the rehearsal (`rehearsal.sources`: the class and the special tokens, when its tokenizer files cannot be read).
Where a checkpoint's own files can be read (a local model folder, or the hub / the local Hugging Face cache), they win
over this table.

- Qwen/Qwen3-{1.7B,4B,8B}-Base: Qwen3ForCausalLM, qwen3 family; eos <|endoftext|>, pad <|endoftext|>; its
  generation_config stops at <|endoftext|>; chat template: the family file's.
- Qwen/Qwen3-4B: Qwen3ForCausalLM, qwen3; eos <|im_end|>, pad <|endoftext|>; stops at <|im_end|>, <|endoftext|>;
  chat template: the family file's (the shared qwen3 folder is this post-trained, hybrid-thinking one).
- Qwen/Qwen3-4B-Instruct-2507: as Qwen3-4B, but its template writes no empty <think></think> block.
- meta-llama/Llama-3.2-3B-Instruct: LlamaForCausalLM, llama3; eos <|eot_id|>, no pad, bos <|begin_of_text|>; stops
  at 128001, 128008, 128009 (<|end_of_text|>, <|eom_id|>, <|eot_id|>; the Llama 3 family file still calls 128008
  <|reserved_special_token_4|>); its template opens with a system header the family file lacks.

Sources: each checkpoint's files on huggingface.co/<id> as published in 2025 (config.json: architectures and sizes;
tokenizer_config.json: eos_token, pad_token, chat_template; generation_config.json: eos_token_id, sampling defaults).
The sizes were checked against the model cards' parameter counts: Qwen3-1.7B 1.7 B (1.4 B without embeddings),
Qwen3-4B 4.0 B (3.6 B), Qwen3-8B 8.2 B (6.95 B), Llama-3.2-3B 3.21 B; the planner's exact counts are 1.72 B (1.41 B),
4.02 B (3.63 B), 8.19 B (6.95 B) and 3.21 B (tests/agents/test_memory_plan.py). No hub is reachable from where this
table was written, so two token facts were checked against other sources: the eos of the Base and Llama checkpoints
against ../shared/tokenizers/README.md ("Qwen3-*-Base ends with <|endoftext|>", "Llama-3.2-*-Instruct ends turns with
<|eot_id|>"), and Llama-3.2-Instruct's ids against vLLM's tokenizer test (eos 128009; generation_config eos 128001,
128008, 128009). The rest, the Base checkpoints shipping the post-trained chat template among it, is the hub files as
known when the table was written: the checkpoint's own files (a folder, the hub, the Hugging Face cache) settle it, and
a rehearsal that can read them uses them instead. The family folders of ../shared/tokenizers are Qwen3's post-trained
(hybrid thinking) files and Llama 3's original ones (eos <|end_of_text|>, no pad, the Llama 3 template).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TOKENIZER_FAMILIES = {"qwen3": "qwen3", "qwen2": "qwen3", "llama": "llama3"}
"""config.json model_type → tokenizer family folder (Qwen2 and Qwen3 share one vocabulary)."""


@dataclass(frozen=True)
class HubCheckpoint:
    """One checkpoint's facts, as its own files state them."""

    config: dict[str, Any]
    """config.json's keys the planner and the rehearsal read: architectures, model_type and the sizes."""
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

    @property
    def family(self) -> str:
        """The tokenizer family: the folder name under rehearsal.tokenizers (qwen3, llama3)."""
        return TOKENIZER_FAMILIES[self.config["model_type"]]


_QWEN3_BASE_TOKENS = dict(
    eos="<|endoftext|>", pad="<|endoftext|>", stops=(151643,), generation={"do_sample": False, "max_new_tokens": 2048}
)
_QWEN3_CHAT_TOKENS = dict(
    eos="<|im_end|>",
    pad="<|endoftext|>",
    stops=(151645, 151643),
    generation={"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95},
)

KNOWN_CHECKPOINTS: dict[str, HubCheckpoint] = {
    # config: copied from each checkpoint's config.json (module docstring: sources and the checked counts).
    "Qwen/Qwen3-1.7B-Base": HubCheckpoint(
        dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=2048, num_hidden_layers=28,
             num_attention_heads=16, num_key_value_heads=8, head_dim=128, intermediate_size=6144, vocab_size=151936,
             tie_word_embeddings=True, max_position_embeddings=32768),
        **_QWEN3_BASE_TOKENS,
    ),
    "Qwen/Qwen3-4B-Base": HubCheckpoint(
        dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=2560, num_hidden_layers=36,
             num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=9728, vocab_size=151936,
             tie_word_embeddings=True, max_position_embeddings=32768),
        **_QWEN3_BASE_TOKENS,
    ),
    "Qwen/Qwen3-8B-Base": HubCheckpoint(
        dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=4096, num_hidden_layers=36,
             num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=12288, vocab_size=151936,
             tie_word_embeddings=False, max_position_embeddings=32768),
        **_QWEN3_BASE_TOKENS,
    ),
    "Qwen/Qwen3-4B": HubCheckpoint(
        dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=2560, num_hidden_layers=36,
             num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=9728, vocab_size=151936,
             tie_word_embeddings=True, max_position_embeddings=40960),
        **_QWEN3_CHAT_TOKENS,
    ),
    "Qwen/Qwen3-4B-Instruct-2507": HubCheckpoint(
        dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=2560, num_hidden_layers=36,
             num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=9728, vocab_size=151936,
             tie_word_embeddings=True, max_position_embeddings=262144),
        **{**_QWEN3_CHAT_TOKENS, "generation": {"do_sample": True, "temperature": 0.7, "top_k": 20, "top_p": 0.8}},
        template_note="the checkpoint's own (non-thinking only) opens the answer without the empty <think></think> "
        "block the family file writes under enable_thinking=False: its real prompts are 4 tokens shorter",
    ),
    "meta-llama/Llama-3.2-3B-Instruct": HubCheckpoint(
        dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=3072, num_hidden_layers=28,
             num_attention_heads=24, num_key_value_heads=8, head_dim=128, intermediate_size=8192, vocab_size=128256,
             tie_word_embeddings=True, max_position_embeddings=131072),
        eos="<|eot_id|>", pad=None, bos="<|begin_of_text|>", stops=(128001, 128008, 128009),
        generation={"do_sample": True, "temperature": 0.6, "top_p": 0.9},
        template_note="the checkpoint's own opens with a system header (Cutting Knowledge Date, Today Date: the day "
        "of the run) that the family file (Llama 3's) lacks: its real prompts are 25 tokens longer",
    ),
}  # fmt: skip
"""Every checkpoint the paper presets name, by hub id (module docstring: sources)."""
