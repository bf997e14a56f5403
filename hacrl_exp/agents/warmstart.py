"""Supervised warm start of a tiny agent (loss on response tokens only), and an on-disk cache of its result.

The cache folder is named by the sha256 of the canonical JSON of everything that decides the trained weights: the
caller's description of the model, tokenizer and task (its data seeds unless both 0, any accuracy target), plus steps,
batch size, lr, seed and WARM_START_VERSION. Entries are written to a temporary folder and renamed into place, so a
reader never sees a half-written one; while one process builds an entry it holds that entry's lock file
(`.<hash[:16]>.lock`), so another process asking for it (parallel jobs, test workers) waits and reads it instead of
training it again.

A warm start can stop at a capability instead of a step count (`AccuracyTarget`): every check_every steps (and at
the cap, `steps`) it measures greedy held-out accuracy and stops once that reaches the target, so a weak and a strong
agent start where they are asked to, at every seed and on every machine, rather than wherever a fixed count lands.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from tqdm.auto import tqdm

from hacrl_exp.agents.agent import save_tokenizer
from hacrl_exp.paths import open_no_follow, output_error
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.rollout.hf import HFRolloutEngine
from hacrl_exp.tasks.base import Grade, Problem

log = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class AccuracyTarget:
    """Stop a warm start once `measure(model, tokenizer)` ≥ `accuracy`, measured every `check_every` steps and at
    the cap (`greedy_accuracy` on a held-out subset, bound to its problems)."""

    accuracy: float
    check_every: int
    measure: Callable[[transformers.PreTrainedModel, transformers.PreTrainedTokenizerBase], float]


def greedy_accuracy(
    model: transformers.PreTrainedModel,
    tokenizer: transformers.PreTrainedTokenizerBase,
    problems: Sequence[Problem],
    grade: Callable[[list[str], Sequence[Problem]], list[Grade]],
    max_new_tokens: int,
) -> float:
    """Mean over categories of the greedy accuracy on `problems` (each category's mean reward, then their mean: the
    held-out `accuracy/mean` of docs/metrics.md). Prompts are plain text, as a tiny agent renders them."""
    engine = HFRolloutEngine(model, tokenizer)
    prompts = [tokenizer(p.prompt, add_special_tokens=True)["input_ids"] for p in problems]
    greedy = SamplingSettings(do_sample=False, temperature=0.0, max_new_tokens=max_new_tokens)
    by_category: dict[str, list[float]] = defaultdict(list)
    for problem, graded in zip(problems, grade(engine.generate(prompts, 1, greedy).texts, problems)):
        by_category[problem.category].append(graded.reward)
    return sum(sum(v) / len(v) for v in by_category.values()) / len(by_category)


def check_subset(problems: Sequence[Problem], per_category: int) -> list[Problem]:
    """The first `per_category` problems of each category, in the given order (the target check's held-out subset)."""
    taken: dict[str, int] = defaultdict(int)
    out = []
    for problem in problems:
        if taken[problem.category] < per_category:
            taken[problem.category] += 1
            out.append(problem)
    return out


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
    target: AccuracyTarget | None = None,
) -> dict[str, Any]:
    """Train `model` in place for `steps` AdamW steps on prompt+solution+EOS, cross-entropy on response tokens only.

    Batches walk a seeded permutation of `examples` (a new one each epoch). The loss is the mean over response
    tokens of the batch (transformers' shifted causal-LM loss). Gradients are clipped to norm 1. The lr rises
    linearly over `warmup_steps` (lr·k/warmup_steps at step k, 1-based), then stays constant.
    target: after steps k·check_every and after step `steps`, measure the accuracy; stop once it is ≥ the target.
    Returns {'initial_loss', 'final_loss' (mean of the last 10 steps), 'losses', 'seconds', 'steps' (the cap),
    'steps_run', 'examples', 'checks' ([step, accuracy] of each check), 'heldout_accuracy' (the last check's, or
    None without a target)}.
    """
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps={warmup_steps} must be >= 0")
    if steps < 0 or batch_size < 1 or not examples:
        raise ValueError(f"steps={steps}, batch_size={batch_size}, {len(examples)} examples: need >= 0, >= 1, >= 1")
    start = time.perf_counter()
    data = encode_examples(tokenizer, examples)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    order, cursor, losses, checks = torch.randperm(len(data), generator=gen), 0, [], []
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
        if target is not None and (step % target.check_every == 0 or step == steps):
            checks.append([step, target.measure(model, tokenizer)])
            if checks[-1][1] >= target.accuracy:
                break
    if target is not None and (not checks or checks[-1][1] < target.accuracy):
        reached = f"{checks[-1][1]:.3f}" if checks else "nothing measured"
        log.warning("warm start: held-out accuracy %s after the cap of %d steps, below target %g", reached, steps,
                    target.accuracy)  # fmt: skip
    tail = losses[-10:]
    return {
        "initial_loss": losses[0] if losses else float("nan"),
        "final_loss": sum(tail) / len(tail) if tail else float("nan"),
        "losses": losses,
        "seconds": time.perf_counter() - start,
        "steps": steps,
        "steps_run": len(losses),
        "examples": len(examples),
        "checks": checks,
        "heldout_accuracy": checks[-1][1] if checks else None,
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
    target: AccuracyTarget | None = None,
) -> WarmStartResult:
    """Load the warm-started agent for `key` from `cache_dir`, or build, train and store it.

    `key` must describe everything `build_fn` and `examples_fn` depend on (arch, sizes, tokenizer kind and vocab,
    task tiers, format and seeds, example count and seed, ...) and, with a `target`, everything its measure depends
    on (target, check_every, the checked problems): it is the only thing hashed with the training settings.
    On a miss: (model, tokenizer) = build_fn(), supervised_warm_start on examples_fn(), then save_pretrained
    (safetensors) plus warm_start.json into cache_dir/<hash>/ atomically.
    """
    cache_dir = Path(cache_dir)
    digest = cache_key(key, steps, batch_size, lr, seed, warmup_steps)
    path = cache_dir / digest
    meta_file = "warm_start.json"
    if (path / meta_file).is_file():
        return _cached(path, meta_file)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _entry_lock(cache_dir / f".{digest[:16]}.lock"):
        if (path / meta_file).is_file():  # another process built it while this one waited
            return _cached(path, meta_file)
        model, tokenizer = build_fn()
        stats = supervised_warm_start(
            model, tokenizer, examples_fn(), steps, batch_size, lr, seed, progress, warmup_steps, target
        )
        meta = {"key": key, "steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "stats": stats}
        meta.update(warmup_steps=warmup_steps, version=WARM_START_VERSION)
        _store(model, tokenizer, meta, path, meta_file)
    return WarmStartResult(model, tokenizer, stats, False, path)


def _store(model, tokenizer, meta: dict, path: Path, meta_file: str) -> None:
    """Save the entry (`_save_entry`). A full disk or a denied path is one OutputError naming the file in the cache
    (trainer.cache_dir), not the run folder."""
    try:
        _save_entry(model, tokenizer, meta, path, meta_file)
    except Exception as exc:  # safetensors reports a full disk as its own error: output_error reads the free bytes
        error = output_error(exc, path, "or give another trainer.cache_dir, then run again")
        if error is None:
            raise
        raise error from None


def _save_entry(model, tokenizer, meta: dict, path: Path, meta_file: str) -> None:
    """Save into a temporary folder beside `path`, then rename it into place (meta_file written last)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name[:16]}-", dir=path.parent))
    try:
        model.save_pretrained(tmp)
        save_tokenizer(tokenizer, tmp)
        (tmp / meta_file).write_text(json.dumps(meta, indent=1, sort_keys=True))  # written last: marks completeness
        try:
            os.replace(tmp, path)
        except OSError:  # another process (without the lock: no fcntl) stored the same entry first: keep theirs
            if not (path / meta_file).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _cached(path: Path, meta_file: str) -> WarmStartResult:
    model, tokenizer = load_agent(path)
    return WarmStartResult(model, tokenizer, json.loads((path / meta_file).read_text())["stats"], True, path)


@contextmanager
def _entry_lock(lock_file: Path) -> Iterator[None]:
    """An exclusive lock on `lock_file` (created, and kept: removing it would let a waiter lock a stale inode) for
    the body; nothing where fcntl is missing (Windows): there both processes build, and the rename keeps one."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    handle = open_no_follow(lock_file, os.O_RDWR | os.O_CREAT)  # a symlink planted there is refused, not followed
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        yield
    finally:
        os.close(handle)
