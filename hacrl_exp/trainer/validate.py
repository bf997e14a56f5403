"""The full validation of a training config: the schema's checks, then the names the packages' registries hold.

`hacrl_exp.config.validate.validate_schema` checks what the schema alone knows. This module adds the checks that need
the layers below the trainer: the algorithm (`hacrl_exp.algo.ALGORITHMS`) and whether the agent graph suits it
(`hacrl_exp.graph`), the task's reward (`hacrl_exp.rewards.REWARDS`) and bad-row policy (`hacrl_exp.tasks.rows`), and
`trainer.eval_benchmarks` (`evaluation/*.yaml`). Both run right after composition, before any model loads; every
error is one ConfigError line naming the key, the value and the fix.
"""

from __future__ import annotations

import re

from omegaconf import DictConfig

from hacrl_exp.algo import ALGORITHMS
from hacrl_exp.config.flags import check_threads
from hacrl_exp.config.preflight import compose_config, first_choices
from hacrl_exp.config.schema import Config
from hacrl_exp.config.validate import check_choice, validate_schema
from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.spec import known_benchmarks
from hacrl_exp.graph import TOPOLOGIES, graph_from_config
from hacrl_exp.rewards.grader import REWARDS
from hacrl_exp.tasks.rows import BAD_ROW_POLICIES
from hacrl_exp.tracking.masking import refuse_secret_name, remember_config_secrets


def preflight(overrides: list[str], config_name: str = "config") -> Config:
    """Compose (first sweep values) and validate fully; raises ConfigError on any bad key, group or value."""
    return validate(compose_config(first_choices(overrides), config_name))


def validate(cfg: DictConfig | dict) -> Config:
    """Typed, range-checked Config whose every registry name is known and whose agent graph suits its algorithm."""
    config = check_registries(validate_schema(cfg))
    if isinstance(cfg, DictConfig):  # resolved without error: the secrets to mask in what is written (tracking.masking)
        remember_config_secrets(cfg)
        refuse_secret_name("tracking.experiment", config.tracking.experiment)  # the store's key: not maskable
    return config


def check_registries(config: Config) -> Config:
    """The config, after checking the names other packages own and what they imply; ConfigError otherwise."""
    check_choice("agents.topology", config.agents.topology, TOPOLOGIES)
    check_choice("algorithm.name", config.algorithm.name, tuple(ALGORITHMS))
    check_choice("task.bad_rows", config.task.bad_rows, BAD_ROW_POLICIES)
    check_choice("task.reward", config.task.reward, REWARDS)
    if config.task.name != "math" and config.task.reward != REWARDS[0]:
        raise ConfigError(
            f"task.reward={config.task.reward} applies to task=math only; task={config.task.name} is graded by exact "
            f"match. Drop the override or use task=math"
        )
    _check_graph(config)
    if config.executor.backend == "local":  # a Ray actor's threads run on its node, whose cores are not known here
        check_threads("trainer.threads", config.trainer.threads)
    check_threads("rehearsal.threads", config.rehearsal.threads)
    if config.trainer.eval_benchmarks:
        known = known_benchmarks()
        for name in config.trainer.eval_benchmarks:
            if name not in known:
                raise ConfigError(
                    f"trainer.eval_benchmarks has {name!r}, not a benchmark of evaluation/; known: {known}"
                )
    return config


def _check_graph(config: Config) -> None:
    """Someone learns; the algorithm has the agents it needs and, when it shares rollouts, a source for a learner."""
    algorithm, members = ALGORITHMS[config.algorithm.name], config.agents.members
    try:
        graph = graph_from_config(config.agents, config.algorithm.alpha)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if not graph.learners:
        raise ConfigError("every agent is frozen (agents.members.<name>.frozen); at least one must learn")
    if len(members) < algorithm.min_agents:
        raise ConfigError(
            f"algorithm={algorithm.name} needs at least {algorithm.min_agents} agents but agents has {len(members)}; "
            "use agents=pair, or algorithm=gspo for a single agent"
        )
    if algorithm.shares_rollouts and not graph.edges:
        raise ConfigError(
            f"algorithm={algorithm.name} shares rollouts but agents.topology={config.agents.topology} "
            "gives no learner a source; use topology all_to_all, star or ring"
        )
    sharded = [name for name, agent in members.items() if agent.world_size > 1]
    if algorithm.dynamic_sampling and sharded:
        # each rank would regenerate and count every degenerate group: the rows and cost/* are not split yet
        raise ConfigError(
            f"algorithm={algorithm.name} (dynamic sampling) with a sharded agent ({', '.join(sharded)}) is not built; "
            "set world_size=1 or use algorithm=gspo"
        )


WARM_START_SAMPLE = 512
"""Warm-start examples whose lengths are checked before anything is written (a prefix of MathTask's; drawn alike for
generated tasks)."""


def check_task(config: Config, task) -> None:
    """What the task's data implies for the agents, before anything is written: the data rows load (a bad row is one
    DataError naming file:line), a tiny BPE tokenizer's vocabulary covers the task's alphabet, and a tiny model with
    learned positions (OPT, GPT-2) holds its warm-start texts."""
    for rows in ("train_set", "eval_set"):  # MathTask reads and checks its rows on first use (tasks/rows.py)
        getattr(task, rows, None)
    from hacrl_exp.agents.tiny import SPECIAL_TOKENS

    alphabet = set(getattr(task, "alphabet", ""))
    for index, (name, agent) in enumerate(config.agents.members.items()):
        key = f"agents.members.{name}"
        if agent.model.source != "tiny":
            continue
        needed = len(SPECIAL_TOKENS) + len(alphabet)
        if agent.tokenizer.kind == "bpe" and agent.tokenizer.vocab_size < needed:
            raise ConfigError(
                f"{key}.tokenizer.vocab_size={agent.tokenizer.vocab_size} is below the {needed} tokens "
                f"task={config.task.name} needs ({len(alphabet)} characters and {len(SPECIAL_TOKENS)} special tokens); "
                f"set it to at least {needed}"
            )
        if agent.warm_start.steps and agent.model.arch in ("opt", "gpt2"):
            count = (lambda text: len(text) + 1) if agent.tokenizer.kind == "char" else least_tokens
            longest = max(map(count, warm_start_texts(agent, task, config.seed * 1000 + index)), default=0)
            if longest > agent.model.max_positions:
                raise ConfigError(
                    f"{key}.model.max_positions={agent.model.max_positions}: task={config.task.name}'s warm-start "
                    f"texts reach {longest} tokens or more; raise it, or set {key}.warm_start.steps=0"
                )


def warm_start_texts(agent, task, seed: int) -> list[str]:
    """Prompt + solution of the first warm-start examples of an agent whose warm start draws with `seed`
    (agents.factory.tiny_model: seed · 1000 + the agent's index)."""
    n = min(agent.warm_start.steps * agent.warm_start.batch_size, WARM_START_SAMPLE)
    return [p.prompt + (p.solution or "") for p in task.supervised_examples(n, seed=seed)]


def least_tokens(text: str) -> int:
    """The fewest tokens a tiny tokenizer makes of `text`, with the EOS after it: one per character outside digit
    runs, at least one per digit run (BPE merges only join digits; a char tokenizer makes exactly this many for text
    without digits)."""
    return len(re.sub(r"[0-9]+", "0", text)) + 1
