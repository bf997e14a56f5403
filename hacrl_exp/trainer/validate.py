"""The full validation of a training config: the schema's checks, then the names the packages' registries hold.

`hacrl_exp.config.validate.validate_schema` checks what the schema alone knows. This module adds the checks that need
the layers below the trainer: the algorithm (`hacrl_exp.algo.ALGORITHMS`) and whether the agent graph suits it
(`hacrl_exp.graph`), the task's reward (`hacrl_exp.rewards.REWARDS`) and bad-row policy (`hacrl_exp.tasks.rows`), and
`trainer.eval_benchmarks` (`evaluation/*.yaml`). Both run right after composition, before any model loads; every
error is one ConfigError line naming the key, the value and the fix.
"""

from __future__ import annotations

from omegaconf import DictConfig

from hacrl_exp.algo import ALGORITHMS
from hacrl_exp.config.preflight import compose_config, first_choices
from hacrl_exp.config.schema import Config
from hacrl_exp.config.validate import check_choice, validate_schema
from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.spec import known_benchmarks
from hacrl_exp.graph import TOPOLOGIES, graph_from_config
from hacrl_exp.rewards.grader import REWARDS
from hacrl_exp.tasks.rows import BAD_ROW_POLICIES


def preflight(overrides: list[str], config_name: str = "config") -> Config:
    """Compose (first sweep values) and validate fully; raises ConfigError on any bad key, group or value."""
    return validate(compose_config(first_choices(overrides), config_name))


def validate(cfg: DictConfig | dict) -> Config:
    """Typed, range-checked Config whose every registry name is known and whose agent graph suits its algorithm."""
    return check_registries(validate_schema(cfg))


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
