"""The algorithm registry and the resolution of HACPO's mechanism switches (hacpo-spec §2 "Toggled off", §2.6, §3).

An `Algorithm` names the objective it computes (`objectives.py`) and how a learner's batch is formed: whether it
shares rollouts, whether its joint baseline is capability-weighted, how many rollouts per prompt. The switches of
`mechanisms.*` are turned into plain step parameters once, by `resolve_mechanisms`, so "off" lives in one place and
the training step never reads a switch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import torch

from hacrl_exp.algo._checks import check_nonnegative, check_range
from hacrl_exp.algo.objectives import Objective, grpo_objective, gspo_objective_loss, hacpo_objective


@dataclass(frozen=True)
class Algorithm:
    """One algorithm: the objective it computes and how a learner's batch is built for it."""

    name: str
    objective: Objective
    shares_rollouts: bool
    """Learners also train on their partners' rollouts (the joint group of spec §1.1)."""
    capability_baseline: bool
    """Advantages use the ω-weighted joint baseline (§2.1); else the plain joint (or own) group mean."""
    weighted_cross: bool = False
    """Cross rows carry HACPO's weight ρ · clip(s, L_u, 1)^α (§2.2, §2.3); Naive's GSPO objective gives them none."""
    rollout_multiplier: int = 1
    """G and updates per step are multiplied by this (GSPO×2, §3.2)."""
    passes: int = 1
    """Passes over the learner's batch per step: every mini-batch is run again in each pass, so the updates and the
    rows trained multiply by it while the rollouts do not (update-matched GSPO: 2, the 4 updates and 256 row-visits
    per step of a HACPO learner with one partner, on its own 128 rows)."""
    min_agents: int = 1
    token_level: bool = False
    """The objective reads per-token old log-probs and uses the GRPO clip range (§3.3)."""
    dynamic_sampling: bool = False
    """DAPO-style dynamic sampling (issue 38): degenerate groups (every reward equal: A = 0) are regenerated until the
    batch holds algorithm.dynamic_target_rows rows with A ≠ 0 or algorithm.dynamic_max_rounds extra rounds ran
    (hacrl_exp.trainer.step.resample_degenerate); the batch keeps its P·G rows. False: no extra round. Not for an
    algorithm that shares rollouts: a partner would read rows whose prompt is not the step's (dynamic_prompts=fresh)."""
    shuffle_partner_rewards: bool = False
    """Control (issue 38): each partner's rewards are permuted within the step before the learner sees them
    (hacrl_exp.trainer.step.with_shuffled_rewards), so its partner rows come in but their signal does not; the
    capability estimates still read the true rewards. False: exactly the algorithm without the control."""

    def __post_init__(self) -> None:
        if self.dynamic_sampling and self.shares_rollouts:
            raise ValueError(f"{self.name}: dynamic sampling is built for algorithms that do not share rollouts")


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm(
            "hacpo", hacpo_objective, shares_rollouts=True, capability_baseline=True, weighted_cross=True, min_agents=2
        ),
        Algorithm("naive", gspo_objective_loss, shares_rollouts=True, capability_baseline=False, min_agents=2),
        Algorithm("gspo", gspo_objective_loss, shares_rollouts=False, capability_baseline=False),
        Algorithm("gspo_x2", gspo_objective_loss, False, False, rollout_multiplier=2),
        Algorithm("gspo_update_matched", gspo_objective_loss, False, False, passes=2),
        Algorithm("gspo_dynamic", gspo_objective_loss, False, False, dynamic_sampling=True),
        Algorithm("grpo", grpo_objective, shares_rollouts=False, capability_baseline=False, token_level=True),
        Algorithm(
            "hacpo_shuffled_partner",
            hacpo_objective,
            shares_rollouts=True,
            capability_baseline=True,
            weighted_cross=True,
            min_agents=2,
            shuffle_partner_rewards=True,
        ),  # fmt: skip
    )
}


def get_algorithm(name: str) -> Algorithm:
    """Look an algorithm up by name; a ValueError lists the known names."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"algorithm={name!r} is unknown; choose one of {sorted(ALGORITHMS)}") from None


class MechanismSwitches(Protocol):
    """The five switches of `mechanisms.*` (hacrl_exp.config.schema.MechanismsConfig)."""

    capability_advantage: bool
    omega: bool
    exponential_is: bool
    stepwise: bool
    clip: bool


@dataclass(frozen=True)
class MechanismParams:
    """HACPO's mechanisms as plain step parameters, every switch already applied (spec §2 "Toggled off")."""

    alpha_from: Mapping[int, float]
    """α of each source edge, by the source agent's index (the `source` its rows carry); 0 with exponential IS off
    (§2.3). Self rows have no α."""
    delta_step: float
    """δ_step; 0 with stepwise off (§2.4): the static window [1 − δ, 1]."""
    weighted_baseline: bool
    """Baseline weights w_{k←j} = 1/ρ(j→k) (§2.1); off for Naive, GSPO and "HACPO − Adv"."""
    weighted_loss: bool
    """Cross loss weight ρ(j→k) (§2.2); off for "HACPO − ω" (weight 1, baseline weights kept)."""
    clip_cross: bool
    """Cross window clip (§2.4); off for "no Clip": J = s·sg[s]^α·ρ·A with the raw ratio."""

    def baseline_weight(self, weights: torch.Tensor) -> torch.Tensor:
        """w = the given 1/ρ, or all ones when the baseline is not weighted."""
        return weights if self.weighted_baseline else torch.ones_like(weights)

    def loss_weight(self, rho: torch.Tensor) -> torch.Tensor:
        """ρ(j→k), or all ones when the cross loss is not weighted."""
        return rho if self.weighted_loss else torch.ones_like(rho)


def resolve_mechanisms(
    switches: MechanismSwitches, algorithm: Algorithm, alpha_from: Mapping[int, float], delta_step: float
) -> MechanismParams:
    """The switches of one run applied to its algorithm and hyper-parameters (α per edge, by source index; δ_step).

    The baseline is capability-weighted only when the algorithm uses it (HACPO) and `capability_advantage` is on;
    ρ, α and the clip apply to cross rows, which only sharing algorithms have, and ρ and α only where the objective
    weights them (HACPO): Naive resolves to α = 0 and loss weight 1, so the effective weight the step logs for its
    cross rows is the 1 its objective applies. ValueError names a bad α or δ_step.
    """
    for alpha in alpha_from.values():
        check_nonnegative("alpha", alpha)
    check_nonnegative("delta_step", delta_step)
    weighted = switches.exponential_is and algorithm.weighted_cross
    return MechanismParams(
        alpha_from={source: float(a) if weighted else 0.0 for source, a in alpha_from.items()},
        delta_step=delta_step if switches.stepwise else 0.0,
        weighted_baseline=algorithm.capability_baseline and switches.capability_advantage,
        weighted_loss=switches.omega and algorithm.weighted_cross,
        clip_cross=switches.clip,
    )


def check_hacpo_hyperparameters(alpha: float, delta: float, delta_step: float) -> None:
    """Validate α ≥ 0, δ ∈ [0, 1) and δ_step ≥ 0; the ValueError names the argument."""
    check_nonnegative("alpha", alpha)
    check_range("delta", delta, 0.0, 1.0, high_open=True)
    check_nonnegative("delta_step", delta_step)
