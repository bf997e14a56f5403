"""Supervised warm start of a tiny agent (loss on response tokens only), and an on-disk cache of its result.

The cache folder is named by the sha256 of the canonical JSON of everything that decides the trained weights: the
caller's description of the model, tokenizer and task, plus steps, batch size, lr, seed and WARM_START_VERSION.
Entries are written to a temporary folder and renamed into place, so a reader never sees a half-written one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from tqdm.auto import tqdm

from hacrl_exp.tasks.base import Problem

WARM_START_VERSION = 1
"""Bump when the training recipe changes (loss, batching, optimiser): it invalidates every cache entry."""

IGNORE_INDEX = -100
"""Label id that transformers' causal-LM loss skips (prompt and padding positions)."""


def encode_examples(tokenizer: transformers.PreTrainedTokenizerBase, examples: Sequence[Problem]) -> list[tuple]:
    """(prompt ids, response ids + EOS) per example; prompt and response are tokenised separately, no specials."""
    if any(p.solution is None for p in examples):
        raise ValueError("every example needs a solution (the supervised target)")
    prompts = tokenizer([p.prompt for p in examples], add_special_tokens=False)["input_ids"]
    responses = tokenizer([p.solution for p in examples], add_special_tokens=False)["input_ids"]
    return [(q, [*r, tokenizer.eos_token_id]) for q, r in zip(prompts, responses)]


def collate_right_padded(pairs: Sequence[tuple], pad_id: int) -> dict[str, torch.Tensor]:
    """input_ids, attention_mask and labels (B, T), right-padded: labels are IGNORE_INDEX on prompt and padding."""
    width = max(len(q) + len(r) for q, r in pairs)
    ids = torch.full((len(pairs), width), pad_id, dtype=torch.long)
    labels = torch.full((len(pairs), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for i, (q, r) in enumerate(pairs):
        n = len(q) + len(r)
        ids[i, :n] = torch.tensor(q + r)
        labels[i, len(q) : n] = torch.tensor(r)
        mask[i, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def supervised_warm_start(
    model: transformers.PreTrainedModel,
    tokenizer: transformers.PreTrainedTokenizerBase,
    examples: list[Problem],
    steps: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    progress: bool = True,
    warmup_steps: int = 0,
) -> dict[str, Any]:
    """Train `model` in place for `steps` AdamW steps on prompt+solution+EOS, cross-entropy on response tokens only.

    Batches walk a seeded permutation of `examples` (a new one each epoch). The loss is the mean over response
    tokens of the batch (transformers' shifted causal-LM loss). Gradients are clipped to norm 1. The lr rises
    linearly over `warmup_steps` (lr·k/warmup_steps at step k, 1-based), then stays constant.
    Returns {'initial_loss', 'final_loss' (mean of the last 10 steps), 'losses', 'seconds', 'steps', 'examples'}.
    """
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps={warmup_steps} must be >= 0")
    if steps < 0 or batch_size < 1 or not examples:
        raise ValueError(f"steps={steps}, batch_size={batch_size}, {len(examples)} examples: need >= 0, >= 1, >= 1")
    start = time.perf_counter()
    data = encode_examples(tokenizer, examples)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    order, cursor, losses = torch.randperm(len(data), generator=gen), 0, []
    for step in tqdm(range(1, steps + 1), desc="warm start", disable=not progress, leave=False):
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, step / warmup_steps) if warmup_steps > 0 else lr
        idx = []
        while len(idx) < batch_size:  # wrap into a fresh permutation at the end of an epoch
            take = order[cursor : cursor + batch_size - len(idx)].tolist()
            idx, cursor = idx + take, cursor + len(take)
            if cursor >= len(data):
                order, cursor = torch.randperm(len(data), generator=gen), 0
        loss = model(**collate_right_padded([data[i] for i in idx], tokenizer.pad_token_id)).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if not math.isfinite(losses[-1]):
            raise FloatingPointError(f"warm-start loss became {losses[-1]} at step {len(losses)}; lower lr={lr}")
    tail = losses[-10:]
    return {
        "initial_loss": losses[0] if losses else float("nan"),
        "final_loss": sum(tail) / len(tail) if tail else float("nan"),
        "losses": losses,
        "seconds": time.perf_counter() - start,
        "steps": steps,
        "examples": len(examples),
    }


def cache_key(key: dict, steps: int, batch_size: int, lr: float, seed: int, warmup_steps: int = 0) -> str:
    """sha256 hex of the canonical JSON of `key` plus the training settings and WARM_START_VERSION."""
    full = {"model": key, "steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "warmup": warmup_steps}
    full["version"] = WARM_START_VERSION
    text = json.dumps(full, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class WarmStartResult:
    """A warm-started agent. `hit` tells whether it came from the cache; `path` is its cache folder."""

    model: transformers.PreTrainedModel
    tokenizer: transformers.PreTrainedTokenizerFast
    stats: dict[str, Any]
    hit: bool
    path: Path


def load_agent(path: Path) -> tuple[transformers.PreTrainedModel, transformers.PreTrainedTokenizerFast]:
    """Model (float32, eval mode) and tokenizer saved with save_pretrained in `path`; no remote code."""
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, trust_remote_code=False, dtype=torch.float32, use_safetensors=True
    )
    model.loss_type = "ForCausalLM"
    return model.eval(), transformers.PreTrainedTokenizerFast.from_pretrained(path)


def warm_start_cached(
    build_fn: Callable[[], tuple[transformers.PreTrainedModel, transformers.PreTrainedTokenizerFast]],
    examples_fn: Callable[[], list[Problem]],
    cache_dir: Path | str,
    key: dict,
    steps: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    progress: bool = True,
    warmup_steps: int = 0,
) -> WarmStartResult:
    """Load the warm-started agent for `key` from `cache_dir`, or build, train and store it.

    `key` must describe everything `build_fn` and `examples_fn` depend on (arch, sizes, tokenizer kind and vocab,
    task tiers and format, example count and seed, ...): it is the only thing hashed with the training settings.
    On a miss: (model, tokenizer) = build_fn(), supervised_warm_start on examples_fn(), then save_pretrained
    (safetensors) plus warm_start.json into cache_dir/<hash>/ atomically.
    """
    cache_dir = Path(cache_dir)
    digest = cache_key(key, steps, batch_size, lr, seed, warmup_steps)
    path = cache_dir / digest
    meta_file = "warm_start.json"
    if (path / meta_file).is_file():
        model, tokenizer = load_agent(path)
        return WarmStartResult(model, tokenizer, json.loads((path / meta_file).read_text())["stats"], True, path)
    model, tokenizer = build_fn()
    stats = supervised_warm_start(model, tokenizer, examples_fn(), steps, batch_size, lr, seed, progress, warmup_steps)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:16]}-", dir=cache_dir))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        meta = {"key": key, "steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "stats": stats}
        meta["warmup_steps"] = warmup_steps
        meta["version"] = WARM_START_VERSION
        (tmp / meta_file).write_text(json.dumps(meta, indent=1, sort_keys=True))  # written last: marks completeness
        try:
            os.replace(tmp, path)
        except OSError:  # another process stored the same entry first: theirs is equivalent, keep it
            if not (path / meta_file).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return WarmStartResult(model, tokenizer, stats, False, path)
