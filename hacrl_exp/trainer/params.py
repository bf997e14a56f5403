"""Each learner's update settings, resolved once from the config: the training step reads no switch.

The sampling settings (temperature, top-p, max new tokens) are not here: they are one `SamplingSettings`
(`rollout.base.SamplingSettings.of(config.rollout)`, built by the loop), which generates and scores a step's rollouts
and travels with them (`SourceRollouts.sampling`) to the update, so both halves of every ratio read one temperature.

`learner_params` applies the algorithm (which objective, whether rollouts are shared) and the mechanism switches
(`hacrl_exp.algo.resolve_mechanisms`: α per edge, δ_step, baseline and loss weights on or off, cross clip on or off)
to plain values, at validation time (`hacrl_exp.trainer.loop.train`) and again where each worker is built.
"""

from __future__ import annotations

from dataclasses import dataclass

from hacrl_exp.algo import MechanismParams, Objective, ObjectiveParams, get_algorithm, resolve_mechanisms
from hacrl_exp.config.schema import Config
from hacrl_exp.errors import ConfigError
from hacrl_exp.graph import AgentGraph, graph_from_config


@dataclass(frozen=True)
class LearnerParams:
    """Everything one learner's update reads (hacrl_exp.trainer.step)."""

    index: int
    sources: tuple[int, ...]
    """Agents whose rollouts it learns from, in declared order (its cross blocks, spec §1.6); () without sharing."""
    joint_group: bool
    """Advantages over the joint group of all blocks (sharing algorithms, §2.1), else over its own group (§1.1)."""
    mechanisms: MechanismParams
    objective: Objective
    objective_params: ObjectiveParams
    token_level: bool
    """The objective reads per-token old log-probs (GRPO)."""
    delta: float
    restart_u_per_source: bool
    minibatch_size: int
    micro_batch_size: int
    adv_eps: float
    kl_coef: float
    kl_aggregation: str
    max_grad_norm: float
    skip_zero_advantage: bool = True
    """Rows with A = 0 and no KL term are not run through the model (their gradient is 0)."""
    passes: int = 1
    """Passes over the batch per step (`Algorithm.passes`): each runs every mini-batch again, u continuing."""
    dynamic_target_rows: int = 0
    """Dynamic sampling's target of rows with A ≠ 0 per step (`Algorithm.dynamic_sampling`); 0: off."""
    dynamic_max_rounds: int = 0
    """Dynamic sampling's cap on extra generation rounds per step."""
    dynamic_fresh_prompts: bool = False
    """Dynamic sampling answers new training prompts in its extra rounds (algorithm.dynamic_prompts=fresh), else
    the degenerate prompts again."""
    shuffle_partner_rewards: bool = False
    """Its partners' rewards are permuted within the step before it learns (`Algorithm.shuffle_partner_rewards`)."""


def dynamic_target(on: bool, target: int, trainer) -> int:
    """Rows with A ≠ 0 dynamic sampling aims for per step: min(target or P·G, P·G) when on, else 0 (off)."""
    rows = trainer.prompts_per_step * trainer.group_size
    return min(target or rows, rows) if on else 0


def learner_params(config: Config, graph: AgentGraph | None = None) -> dict[int, LearnerParams]:
    """{agent index: its LearnerParams} for every learner of the graph (frozen agents have none)."""
    algorithm, algo = get_algorithm(config.algorithm.name), config.algorithm
    graph = graph or graph_from_config(config.agents, algo.alpha)
    names, trainer = list(graph.names), config.trainer
    out = {}
    for learner in graph.learners:
        edges = graph.sources_of(learner) if algorithm.shares_rollouts else []
        try:
            alpha_from = {names.index(e.source): e.alpha for e in edges}
            mechanisms = resolve_mechanisms(config.mechanisms, algorithm, alpha_from, algo.delta_step)
        except ValueError as exc:
            raise ConfigError(f"{exc} (algorithm.* or agents.members.{learner}.alpha_from)") from None
        token_level = algorithm.token_level
        out[names.index(learner)] = LearnerParams(
            index=names.index(learner),
            sources=tuple(names.index(e.source) for e in edges),
            joint_group=algorithm.shares_rollouts,
            mechanisms=mechanisms,
            objective=algorithm.objective,
            objective_params=ObjectiveParams(
                eps_low=algo.grpo_clip_low if token_level else algo.self_clip_low,
                eps_high=algo.grpo_clip_high if token_level else algo.self_clip_high,
                clip_cross=mechanisms.clip_cross,
                is_factor_on_raw_ratio=algo.is_factor_on_raw_ratio,
                log_ratio_clamp=algo.log_ratio_clamp,
            ),
            token_level=token_level,
            delta=algo.delta,
            restart_u_per_source=algo.restart_u_per_source,
            minibatch_size=trainer.prompts_per_step * trainer.group_size // trainer.minibatches_per_block,
            micro_batch_size=trainer.micro_batch_size,
            adv_eps=algo.adv_eps,
            kl_coef=algo.kl_coef,
            kl_aggregation=algo.kl_aggregation,
            max_grad_norm=trainer.max_grad_norm,
            passes=algorithm.passes,
            shuffle_partner_rewards=algorithm.shuffle_partner_rewards,
            dynamic_target_rows=dynamic_target(algorithm.dynamic_sampling, algo.dynamic_target_rows, trainer),
            dynamic_max_rounds=algo.dynamic_max_rounds if algorithm.dynamic_sampling else 0,
            dynamic_fresh_prompts=algorithm.dynamic_sampling and algo.dynamic_prompts == "fresh",
        )
    return out
