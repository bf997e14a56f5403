"""Build every agent of a config: tiny ones from configs (+ cached warm start), real ones from the hub/disk."""

from __future__ import annotations

from dataclasses import asdict
from functools import partial
from pathlib import Path

import torch
import transformers
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from hacrl_exp.agents.agent import Agent, build_agent, load_pretrained
from hacrl_exp.agents.devices import agent_devices
from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
from hacrl_exp.agents.warmstart import AccuracyTarget, check_subset, greedy_accuracy, warm_start_cached
from hacrl_exp.config.schema import AgentConfig, Config
from hacrl_exp.errors import ConfigError
from hacrl_exp.paths import user_cache_dir

BPE_CORPUS_SIZE = 2000


def cache_dir(config: Config) -> Path:
    """trainer.cache_dir, else $HACRL_CACHE_DIR, else ~/.cache/hacrl_exp."""
    return Path(config.trainer.cache_dir) if config.trainer.cache_dir else user_cache_dir()


def warm_started_tiny_model(cfg: AgentConfig, task, config: Config, index: int):
    """(model, tokenizer, warm_start metrics) of a tiny agent: built from config, then warm-started (cached by config
    hash). Its initialisation, BPE corpus and warm-start examples are drawn with seed · 1000 + index from the task's
    data seed (task.seed): a job's seed varies them all. Metrics: warm_start/steps_run, and with a target
    warm_start/validation_accuracy (the last check's accuracy on the checked validation problems, never the scored
    ones: task.validation_per_tier); {} without a warm start."""
    seed = config.seed * 1000 + index

    def build() -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        corpus = task.sample_texts(BPE_CORPUS_SIZE, seed=seed) if cfg.tokenizer.kind == "bpe" else None
        tokenizer = build_tokenizer(
            cfg.tokenizer.kind,
            task.alphabet,
            corpus,
            cfg.tokenizer.vocab_size,
            model_max_length=cfg.model.max_positions,
        )
        model = build_tiny_model(
            cfg.model.arch,
            tokenizer,
            cfg.model.hidden_size,
            cfg.model.num_layers,
            cfg.model.num_heads,
            max_positions=cfg.model.max_positions,
            seed=seed,
        )
        return model, tokenizer

    warm = cfg.warm_start
    if warm.steps == 0:
        return (*build(), {})
    n_examples = warm.steps * warm.batch_size  # fresh examples, one pass (as measured)
    data = config.task
    # mixed_precision does not change the warm start (float32 on its own): left out, caches from before it stay valid
    model_key = {k: v for k, v in asdict(cfg.model).items() if k != "mixed_precision"}
    key = {
        "model": model_key,
        "tokenizer": asdict(cfg.tokenizer),
        "task": {"name": data.name, "tiers": list(data.tiers), "scratchpad": data.scratchpad},
        "examples": n_examples,
        "init_seed": seed,
    }
    if (data.seed, data.heldout_seed or 0) != (0, 0):  # at 0 and 0 the data are those of entries keyed without them
        key["data_seeds"] = [data.seed, data.heldout_seed]
    target = None
    if warm.target_accuracy is not None:
        problems = check_subset(task.validation_problems(data.validation_per_tier), warm.check_per_category)
        max_new = config.rollout.max_new_tokens
        key["target"] = {"accuracy": warm.target_accuracy, "check_every": warm.check_every, "max_new_tokens": max_new}
        key["target"]["problems"] = [p.id for p in problems]  # 'valid/<tier>/<i>': the validation split, never scored
        measure = partial(greedy_accuracy, problems=problems, grade=task.grade, max_new_tokens=max_new)
        target = AccuracyTarget(warm.target_accuracy, warm.check_every, measure)
    result = warm_start_cached(
        build,
        lambda: task.supervised_examples(n_examples, seed=seed),
        cache_dir(config),
        key,
        warm.steps,
        warm.batch_size,
        warm.lr,
        seed,
        progress=config.trainer.progress,
        warmup_steps=warm.warmup_steps,
        target=target,
    )
    stats = result.stats
    metrics = {"warm_start/steps_run": float(stats.get("steps_run", warm.steps))}
    if stats.get("heldout_accuracy") is not None:
        metrics["warm_start/validation_accuracy"] = float(stats["heldout_accuracy"])
    return result.model, result.tokenizer, metrics


def make_agents(config: Config, task, device: torch.device | None = None) -> list[Agent]:
    """Agents in declared order, each with its model, tokenizer, optimizer, engine and (if KL) reference.

    device None places each agent on its own device (agents.members.<name>.device, else trainer.device; 'auto'
    spreads them over the visible GPUs, agents.devices); a device puts them all there.
    """
    return [make_agent(config, task, device, index) for index in range(len(config.agents.members))]


def make_agent(config: Config, task, device: torch.device | None, index: int) -> Agent:
    """The index-th agent of agents.members (declared order); each agent worker builds its own this way.

    device None: the agent's placed device (agents.devices.agent_devices), checked before any model loads.
    """
    transformers.utils.logging.disable_progress_bar()  # per-file load/save bars would drown the run's own bar
    name, cfg = list(config.agents.members.items())[index]
    device = agent_devices(config)[name] if device is None else device
    warm_start: dict[str, float] = {}
    if cfg.model.source == "pretrained":
        model, tokenizer = load_pretrained(name, cfg)
    else:
        try:
            model, tokenizer, warm_start = warm_started_tiny_model(cfg, task, config, index)
        except ValueError as exc:  # sizes that do not fit the task, e.g. a BPE vocabulary below its alphabet
            raise ConfigError(f"agents.members.{name}: {exc}") from None
    # prompt + response must fit the model's positions; keep the end of long prompts (the question)
    positions = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    prompt_limit = config.task.max_prompt_tokens
    if positions:
        prompt_limit = min(prompt_limit, positions - config.rollout.max_new_tokens)
        if prompt_limit < 8:
            raise ConfigError(
                f"rollout.max_new_tokens={config.rollout.max_new_tokens} leaves no room for a prompt in "
                f"agents.members.{name}'s {positions} positions; raise model.max_positions or lower it"
            )
    agent = build_agent(
        name,
        cfg,
        model,
        tokenizer,
        device=device,
        kl_coef=config.algorithm.kl_coef,
        max_prompt_tokens=prompt_limit,
        max_batch_size=config.rollout.max_batch_size,
        rollout=config.rollout,
        seed=agent_seed(config, index),
    )
    agent.warm_start = warm_start
    return agent


def agent_seed(config: Config, index: int) -> int:
    """Seed of agent `index`'s LoRA initialisation and vLLM engine sampling: seed · 1000 + index."""
    return config.seed * 1000 + index
