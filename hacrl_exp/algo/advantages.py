"""Advantage estimators (hacpo-spec §2.1, §3.1): group-relative and capability-aware.

Every function is pure: tensors in, tensors out, no `.item()`. Rewards are 0/1 floats; a
"joint group" is the N·G responses that N agents produced for one prompt.
"""

from __future__ import annotations

import torch

from hacrl_exp.algo._checks import check_nonnegative

VERL_ADVANTAGE_EPS = 1e-6
"""ε added to the group std by verl, the official HACPO code (spec §2.1 step 6). The default."""

TRL_ADVANTAGE_EPS = 1e-4
"""ε added by TRL's GRPOTrainer (spec §3.4); use it to match TRL exactly."""

GUARD_TOLERANCE = 1e-12
"""μ̂ must exceed 1 by more than this for the guard (§2.1.4) to fire: float rounding is not "> 1"."""


def bessel_std(rewards: torch.Tensor) -> torch.Tensor:
    """Sample std with Bessel's correction over the last dim: sqrt(Σ(r − r̄)² / (n − 1)). Shape (P, n) → (P, 1)."""
    if rewards.shape[-1] < 2:
        raise ValueError(f"rewards has {rewards.shape[-1]} responses per group; the Bessel std needs >= 2")
    return rewards.std(dim=-1, unbiased=True, keepdim=True)


def group_relative_advantages(
    rewards: torch.Tensor, eps: float = VERL_ADVANTAGE_EPS, scale_by_std: bool = True
) -> torch.Tensor:
    """GRPO/GSPO advantage (spec §3.1): A_i = (r_i − mean(r)) / (std(r) + ε), per prompt group.

    rewards (P, G). `eps` is 1e-6 as in verl by default; TRL uses 1e-4 (`TRL_ADVANTAGE_EPS`).
    With `scale_by_std=False` the advantage is r_i − mean(r) (Dr.GRPO style). A uniform group gives 0.
    """
    check_nonnegative("eps", eps)
    centered = rewards - rewards.mean(dim=-1, keepdim=True)
    if not scale_by_std:
        return centered
    return centered / (bessel_std(rewards) + eps)


def capability_aware_baseline(
    rewards: torch.Tensor,
    source: torch.Tensor,
    learner: int,
    baseline_weight: torch.Tensor,
    *,
    uniform_rule: bool = True,
    guard: bool = True,
) -> torch.Tensor:
    """Capability-aware baseline μ̂^(k) of each joint group (spec §2.1, paper eq. 7).

        μ̂^(k) = (1 / nG) · Σ_y w_{k←src(y)} · R(y)        (divisor: the count nG, not Σw; §2.1.3)

    rewards (P, M) raw 0/1 rewards of the M = nG responses of each prompt; source (M,) long, the agent
    id of each column; baseline_weight (N,) or (P, N) with w[learner] = 1 (per-prompt rows allow a
    per-category capability scope). Returns (P, 1).

    uniform_rule: a group whose M rewards are all equal gets μ̂ = that value (§2.1.2), so A = 0.
    guard: μ̂ > 1 falls back to the learner's own mean reward (§2.1.4).
    Both rules are the official code's; switch them off only for theory checks.
    """
    if rewards.dim() != 2 or source.dim() != 1 or source.shape[0] != rewards.shape[1]:
        raise ValueError(f"rewards{list(rewards.shape)} must be (P, M) and source{list(source.shape)} must be (M,)")
    n_agents = baseline_weight.shape[-1]
    if baseline_weight.dim() not in (1, 2) or (baseline_weight.dim() == 2 and baseline_weight.shape[0] != len(rewards)):
        raise ValueError(
            f"baseline_weight{list(baseline_weight.shape)} must be (N,) or (P, N) with P = {len(rewards)} prompts"
        )
    if source.dtype not in (torch.int32, torch.int64) or bool((source < 0).any() | (source >= n_agents).any()):
        raise ValueError(f"source must hold integer agent ids in [0, {n_agents}); got {source.tolist()}")
    if not 0 <= learner < n_agents:
        raise ValueError(f"learner={learner} is not an agent index in [0, {n_agents})")
    own = source == learner
    if not bool(own.any()):
        raise ValueError(f"learner={learner} has no responses in source; the guard needs the learner's own group")
    weight = baseline_weight[..., source]  # (M,) or (P, M)
    mu = (weight * rewards).sum(dim=-1, keepdim=True) / rewards.shape[-1]
    if guard:
        own_mean = rewards[:, own].mean(dim=-1, keepdim=True)
        # a tolerance, so that μ̂ = 1 exactly with w = 1/ρ rounded up (e.g. 5/3) does not trip the guard
        mu = torch.where(mu > 1.0 + GUARD_TOLERANCE, own_mean, mu)
    if uniform_rule:
        first = rewards[:, :1]
        uniform = (rewards == first).all(dim=-1, keepdim=True)
        mu = torch.where(uniform, first, mu)
    return mu


def capability_aware_advantages(
    rewards: torch.Tensor,
    source: torch.Tensor,
    learner: int,
    baseline_weight: torch.Tensor,
    eps: float = VERL_ADVANTAGE_EPS,
    *,
    uniform_rule: bool = True,
    guard: bool = True,
) -> torch.Tensor:
    """HACPO advantage for learner k over each joint group (spec §2.1, paper eq. 6; TV-1, TV-2).

        A^(k)(y) = (R(y) − μ̂^(k)) / (σ_joint + ε),   σ_joint = Bessel std of the raw nG rewards

    Self and cross responses alike use their own raw reward and the learner's baseline
    (`capability_aware_baseline`). With baseline_weight all ones this is the plain joint-group
    advantage used by Naive and the "HACPO − Adv" ablation. Shapes as in `capability_aware_baseline`;
    returns (P, M).
    """
    check_nonnegative("eps", eps)
    mu = capability_aware_baseline(rewards, source, learner, baseline_weight, uniform_rule=uniform_rule, guard=guard)
    return (rewards - mu) / (bessel_std(rewards) + eps)
