"""The objective of each algorithm, one signature: `objective(rows, params) -> (loss, metrics, applied)` (spec §2.5,
§2.6, §3).

`rows` is one micro-batch of a learner's mini-batch (self and cross rows, current and old log-probs); the loss is
scaled so that the micro-batches' losses add up to the mini-batch loss; `applied` is what the objective did to each
row (`RowTerms`: J, the weight on its ratio·A, whether its gradient passed the clip), which the step logs as is.
The registry in `algorithms.py` maps each algorithm name to one of these functions; a new algorithm is a new
function here and one registry line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from hacrl_exp.algo.losses import RowTerms, grpo_token_objective, sequence_policy_terms


@dataclass(kw_only=True)
class PolicyRows:
    """One micro-batch as the objectives see it: B rows, T = longest response in the learner's tokens."""

    logp: torch.Tensor
    """(B, T) float64 current per-token log-probs log π_θ^(k)(y_t) (gradient flows)."""
    mask: torch.Tensor
    """(B, T) bool: real response tokens."""
    s: torch.Tensor
    """(B,) sequence ratio s = exp(m_k − m_src_old), clamped in log space (spec §2.3)."""
    advantages: torch.Tensor
    is_self: torch.Tensor
    loss_weight: torch.Tensor
    """(B,) ρ(j→k) of each row, already 1 where ω is off (value on self rows unused)."""
    alpha: torch.Tensor
    """(B,) α of each row's edge, already 0 where exponential IS is off."""
    lower: float
    """L_u of this mini-batch's update (spec §2.4)."""
    minibatch_rows: int
    minibatch_tokens: int
    old_token_logp: torch.Tensor | None = None
    """(B, T) the learner's own old per-token log-probs (token-level objectives only; self rows)."""


@dataclass(frozen=True)
class ObjectiveParams:
    """The objective's hyper-parameters, with the clip switch already resolved."""

    eps_low: float
    eps_high: float
    clip_cross: bool = True
    is_factor_on_raw_ratio: bool = False
    log_ratio_clamp: float = 10.0


ObjectiveResult = tuple[torch.Tensor, dict[str, tuple[float, float]], RowTerms]
"""(loss of the micro-batch, metrics, what was applied to each row). A metric is a share, (count, out of): the
trainer sums both over the micro-batches and ranks of a mini-batch and logs count / out of, so the logged share is
the mini-batch's whatever the micro-batch size or the number of ranks."""
Objective = Callable[[PolicyRows, ObjectiveParams], ObjectiveResult]


def _sequence_loss(rows: PolicyRows, params: ObjectiveParams, hacpo_cross: bool) -> ObjectiveResult:
    applied = sequence_policy_terms(
        rows.s,
        rows.advantages,
        rows.is_self,
        rows.loss_weight,
        rows.alpha,
        rows.lower,
        hacpo_cross=hacpo_cross,
        clip=params.clip_cross,
        is_factor_on_raw_ratio=params.is_factor_on_raw_ratio,
        eps_low=params.eps_low,
        eps_high=params.eps_high,
    )
    loss = -applied.objective.mean() * len(rows.s) / rows.minibatch_rows
    metrics = {}
    if bool(rows.is_self.any()):
        own_clipped = (applied.objective - rows.s * rows.advantages).abs() > 1e-12
        metrics["self_clipfrac"] = (float(own_clipped[rows.is_self].sum()), float(rows.is_self.sum()))
    return loss, metrics, applied


def hacpo_objective(rows: PolicyRows, params: ObjectiveParams) -> ObjectiveResult:
    """HACPO (spec §2.5): GSPO clip on self rows, J = c·sg[c]^α·ρ·A with c = clip(s, L_u, 1) on cross rows.

    ℒ_micro = −(1/|M|) Σ_{y ∈ micro} J(y), |M| the mini-batch's rows.
    Metrics: self_clipfrac (clipped self rows, self rows).
    """
    return _sequence_loss(rows, params, hacpo_cross=True)


def gspo_objective_loss(rows: PolicyRows, params: ObjectiveParams) -> ObjectiveResult:
    """GSPO (spec §3.1), and Naive's cross rows (§2.6): J = min(s·A, clip(s, 1 − ε_low, 1 + ε_high)·A) on every
    row; ℒ_micro = −(1/|M|) Σ J. Metrics: self_clipfrac (clipped self rows, self rows)."""
    return _sequence_loss(rows, params, hacpo_cross=False)


def grpo_objective(rows: PolicyRows, params: ObjectiveParams) -> ObjectiveResult:
    """GRPO (spec §3.3): per-token J_t = min(r_t·A, clip(r_t, 1 − ε_low, 1 + ε_high)·A) with the dual clip,
    r_t = exp(clamp(ℓ_t − ℓ_old,t)); ℒ_micro = −Σ_t J_t·mask / (tokens of the mini-batch) (token-mean).
    Metrics: self_clipfrac (clipped tokens, tokens)."""
    clamp = params.log_ratio_clamp
    log_ratio = rows.logp - rows.old_token_logp
    objective = grpo_token_objective(log_ratio.clamp(-clamp, clamp), rows.advantages, params.eps_low, params.eps_high)
    loss = -(objective * rows.mask).sum() / max(rows.minibatch_tokens, 1)
    clipped = ((objective - log_ratio.exp() * rows.advantages.unsqueeze(-1)).abs() > 0) & rows.mask
    per_row = (objective * rows.mask).sum(-1)
    applied = RowTerms(per_row, torch.ones_like(rows.s.detach()), ((~clipped) & rows.mask).any(-1))
    return loss, {"self_clipfrac": (float(clipped.sum()), float(rows.mask.sum()))}, applied
