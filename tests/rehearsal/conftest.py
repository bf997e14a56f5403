"""Fixtures of the rehearsal tests: the real tokenizer files of ../shared/tokenizers (skipped when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

TOKENIZERS = Path(__file__).resolve().parents[3] / "shared" / "tokenizers"
"""../shared/tokenizers relative to the repository root."""


@pytest.fixture(scope="session")
def tokenizers() -> Path:
    if not all((TOKENIZERS / family / "tokenizer_config.json").is_file() for family in ("qwen3", "llama3")):
        pytest.skip(f"real tokenizer files not found at {TOKENIZERS} (../shared/tokenizers relative to the repo root)")
    return TOKENIZERS


@pytest.fixture(scope="session")
def checkpoint_tokenizer(tokenizers, tmp_path_factory):
    """checkpoint id → (source, tokenizer), as the rehearsal writes it and the run loads it (family files, its eos)."""
    from transformers import AutoTokenizer

    from hacrl_exp.config.schema import AgentConfig, ModelConfig, TokenizerConfig
    from hacrl_exp.rehearsal.sources import resolve_agent, write_tokenizer

    cache = {}

    def load(checkpoint: str):
        if checkpoint not in cache:
            agent = AgentConfig(
                model=ModelConfig(source="pretrained", path=checkpoint), tokenizer=TokenizerConfig("pretrained")
            )
            source = resolve_agent("a", agent, str(tokenizers))
            folder = tmp_path_factory.mktemp("tokenizer")
            write_tokenizer(source, folder)
            cache[checkpoint] = (source, AutoTokenizer.from_pretrained(folder, padding_side="left"))
        return cache[checkpoint]

    return load
