"""The algorithm registry and the four HACPO mechanism switches (hacpo-spec §2 "Toggled off", §2.6, §3).

An `Algorithm` says which advantage and which objective each sample gets; the trainer reads these
fields and never branches on a name. `Mechanisms.resolve` turns the switches into the effective
hyper-parameters, so "off" lives in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hacrl_exp.algo._checks import check_nonnegative, check_range


@dataclass(frozen=True)
class Algorithm:
    """How one algorithm builds a learner's batch, advantages and loss."""

    name: str
    shares_rollouts: bool
    """Learners also train on their partners' rollouts (the joint group of spec §1.1)."""
    capability_baseline: bool
    """Advantages use the ω-weighted joint baseline (§2.1); else the plain joint (or own) group mean."""
    hacpo_cross: bool
    """Cross samples use the HACPO objective (§2.5); else the plain GSPO clip (Naive, §2.6)."""
    token_level: bool = False
    """GRPO's per-token ratio and token-mean aggregation (§3.3) instead of GSPO's sequence ratio."""
    rollout_multiplier: int = 1
    """G and updates per step are multiplied by this (GSPO×2, §3.2)."""
    min_agents: int = 1


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("hacpo", shares_rollouts=True, capability_baseline=True, hacpo_cross=True, min_agents=2),
        Algorithm("naive", shares_rollouts=True, capability_baseline=False, hacpo_cross=False, min_agents=2),
        Algorithm("gspo", shares_rollouts=False, capability_baseline=False, hacpo_cross=False),
        Algorithm("gspo_x2", shares_rollouts=False, capability_baseline=False, hacpo_cross=False, rollout_multiplier=2),
        Algorithm("grpo", shares_rollouts=False, capability_baseline=False, hacpo_cross=False, token_level=True),
    )
}


def get_algorithm(name: str) -> Algorithm:
    """Look an algorithm up by name; a ValueError lists the known names."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"algorithm={name!r} is unknown; choose one of {sorted(ALGORITHMS)}") from None


@dataclass
class Mechanisms:
    """On/off switches for HACPO's mechanisms; each "off" is the ablation of spec §2."""

    capability_advantage: bool = True
    """§2.1 off ("HACPO − Adv", Table 2): the baseline is the unweighted joint mean."""
    omega: bool = True
    """§2.2 off ("HACPO − ω", Table 3): cross loss weight 1, baseline weights kept."""
    exponential_is: bool = True
    """§2.3 off: α = 0, no sg[c]^α reweighting."""
    stepwise: bool = True
    """§2.4 off ("no Stepwise", Fig. 4): static window [1 − δ, 1], i.e. δ_step = 0."""
    clip: bool = True
    """Cross clipping off ("no Clip", Fig. 4): J = s · sg[s]^α · ρ · A with the raw ratio."""

    def baseline_weight(self, weights: torch.Tensor) -> torch.Tensor:
        """Effective baseline weights: the given w_{k←j}, or all ones with the advantage mechanism off."""
        return weights if self.capability_advantage else torch.ones_like(weights)

    def loss_weight(self, weights: torch.Tensor) -> torch.Tensor:
        """Effective cross loss weights: ρ(j→k), or all ones with ω off."""
        return weights if self.omega else torch.ones_like(weights)

    def alpha(self, alpha: float) -> float:
        """Effective exponential-IS α: the configured one, or 0 when the mechanism is off."""
        check_nonnegative("alpha", alpha)
        return alpha if self.exponential_is else 0.0

    def delta_step(self, delta_step: float) -> float:
        """Effective δ_step: the configured one, or 0 (static bounds) when stepwise is off."""
        check_nonnegative("delta_step", delta_step)
        return delta_step if self.stepwise else 0.0


def check_hacpo_hyperparameters(alpha: float, delta: float, delta_step: float) -> None:
    """Validate α ≥ 0, δ ∈ [0, 1) and δ_step ≥ 0; the ValueError names the argument."""
    check_nonnegative("alpha", alpha)
    check_range("delta", delta, 0.0, 1.0, high_open=True)
    check_nonnegative("delta_step", delta_step)
