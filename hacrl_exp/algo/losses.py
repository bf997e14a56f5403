"""Per-sample objectives and mini-batch policy losses (hacpo-spec §2.4, §2.5, §3.1, §3.3; TV-1, TV-5).

J is the objective to maximise; every loss here is ℒ = −mean J (+ KL). Sequence-level objectives take
s = exp(log s) per sequence (B,) from `ratios.sequence_log_ratio`; the gradient reaches the learner's
tokens through m_k, as ∂ℒ/∂ℓ_t = (1/|y|_k)·∂ℒ/∂m_k (spec §2.5).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hacrl_exp.algo._checks import check_nonnegative, check_per_sample, check_same_shape
from hacrl_exp.algo.ratios import clip_inclusive, inside_window

GSPO_EPS_LOW, GSPO_EPS_HIGH = 3e-4, 4e-4
GRPO_EPS_LOW, GRPO_EPS_HIGH, GRPO_DUAL_CLIP = 0.2, 0.28, 3.0


def ppo_clip_objective(ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float) -> torch.Tensor:
    """PPO pessimistic objective J = min(r·A, clip(r, 1 − ε_low, 1 + ε_high)·A), elementwise.

    Bounds count as inside (spec §9.9): on a bound, and on ties of the min, gradient flows.
    """
    return _ppo_clip(ratio, advantages, eps_low, eps_high)[0]


def _ppo_clip(
    ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(J, unclipped_chosen): the PPO objective and where its min takes r·A, i.e. where J passes gradient to r."""
    check_same_shape(ratio=ratio, advantages=advantages)
    check_nonnegative("eps_low", eps_low)
    check_nonnegative("eps_high", eps_high)
    unclipped = ratio * advantages
    clipped = clip_inclusive(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    chosen = unclipped <= clipped
    return torch.where(chosen, unclipped, clipped), chosen


def gspo_objective(
    s: torch.Tensor, advantages: torch.Tensor, eps_low: float = GSPO_EPS_LOW, eps_high: float = GSPO_EPS_HIGH
) -> torch.Tensor:
    """GSPO / HACPO self-sample objective (spec §2.4, §3.1; TV-1 rows 1–4, TV-5).

        J_self = min( s·A, clip(s, 1 − ε_low, 1 + ε_high)·A ),   ε_low = 3e-4, ε_high = 4e-4

    s, advantages (B,) per sequence.
    """
    return ppo_clip_objective(s, advantages, eps_low, eps_high)


def cross_objective(
    s: torch.Tensor,
    advantages: torch.Tensor,
    loss_weight: torch.Tensor | float,
    alpha: torch.Tensor | float,
    lower_bound: float,
    *,
    clip: bool = True,
    is_factor_on_raw_ratio: bool = False,
) -> torch.Tensor:
    """HACPO cross-sample objective (spec §2.3–2.5, paper eqs. 10–12; TV-1 rows 5–8).

        c       = clip(s, L_u, 1)                     one-sided window, no PPO min
        J_cross = c · sg[c]^α · ρ(j→k) · A            ∂J/∂m = s^(α+1)·ρ·A inside [L_u, 1], else 0

    loss_weight ρ(j→k) and alpha α: scalars or (B,) per sample (α is set per source).
    is_factor_on_raw_ratio: the paper-literal sg[s]^α (eq. 50) instead of the code's sg[c]^α;
    same gradient, different loss value outside the window (spec §9.2, TV-1 C).
    clip=False is the "no Clip" ablation (spec §2.4): J = s · sg[s]^α · ρ · A with raw s.
    """
    return _cross_terms(s, advantages, loss_weight, alpha, lower_bound, clip, is_factor_on_raw_ratio)[0]


def _cross_terms(
    s: torch.Tensor,
    advantages: torch.Tensor,
    loss_weight: torch.Tensor | float,
    alpha: torch.Tensor | float,
    lower_bound: float,
    clip: bool,
    is_factor_on_raw_ratio: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(J_cross, ρ·sg[c]^α) of `cross_objective`: the objective and the weight it applied to c·A (c = s without the
    clip; sg[s]^α for the paper-literal factor)."""
    check_same_shape(s=s, advantages=advantages)
    check_per_sample("loss_weight", loss_weight, s)
    check_per_sample("alpha", alpha, s)
    if bool((torch.as_tensor(alpha) < 0).any()):
        raise ValueError(f"alpha={alpha!r} must be >= 0")
    if clip:
        ratio = clip_inclusive(s, lower_bound, 1.0)
        factor_base = s if is_factor_on_raw_ratio else ratio
    else:
        ratio = factor_base = s
    factor = factor_base.detach().pow(alpha)
    return ratio * factor * loss_weight * advantages, factor * loss_weight


def grpo_token_objective(
    log_ratio: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float = GRPO_EPS_LOW,
    eps_high: float = GRPO_EPS_HIGH,
    dual_clip: float | None = GRPO_DUAL_CLIP,
) -> torch.Tensor:
    """Token-level GRPO objective with DAPO's clip-higher and verl's dual clip (spec §3.3).

        r_t = exp(ℓ_t − ℓ_old,t);  J_t = min(r_t·A, clip(r_t, 1 − ε_low, 1 + ε_high)·A)
        if A < 0: J_t = max(J_t, c·A)            (dual clip, c = 3; None disables it)

    log_ratio (B, T) per token (gradient flows into ℓ_t); advantages (B,) broadcast over tokens.
    """
    if advantages.dim() != 1 or log_ratio.dim() != 2 or advantages.shape[0] != log_ratio.shape[0]:
        raise ValueError(
            f"advantages{list(advantages.shape)} must be (B,) for log_ratio{list(log_ratio.shape)} of shape (B, T)"
        )
    adv = advantages.unsqueeze(-1).expand_as(log_ratio)
    objective = ppo_clip_objective(log_ratio.exp(), adv, eps_low, eps_high)
    if dual_clip is None:
        return objective
    if dual_clip <= 1.0:
        raise ValueError(f"dual_clip={dual_clip!r} must be > 1")
    return torch.where(adv < 0, torch.maximum(objective, dual_clip * adv), objective)


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """verl's low_var_kl per token (spec §1.7, TV-6): d = clamp(ℓ_ref − ℓ, ±20), kl = clamp(e^d − d − 1, ±10)."""
    check_same_shape(logp=logp, ref_logp=ref_logp)
    d = (ref_logp.detach() - logp).clamp(-20.0, 20.0)
    return (d.exp() - d - 1.0).clamp(-10.0, 10.0)


def kl_penalty(
    logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, aggregation: str, self_rows: int, self_tokens: int
) -> torch.Tensor:
    """KL term of the self rows of one micro-batch, scaled to its mini-batch (spec §1.7), k3 = `k3_kl` per token:

        token_mean           Σ_rows Σ_t k3_t·mask / self_tokens          (C0: every self token of the mini-batch)
        seq_mean_token_mean  Σ_rows (Σ_t k3_t·mask / |y|) / self_rows    (C1: every self row counts once)

    logp, ref_logp, mask (B, T) of this micro-batch's self rows; self_rows, self_tokens count the mini-batch's.
    """
    kl = k3_kl(logp, ref_logp) * mask
    if aggregation == "token_mean":
        return kl.sum() / self_tokens
    return (kl.sum(-1) / mask.sum(-1).clamp_min(1)).sum() / self_rows


def seq_mean_token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(1/B) Σ_b [Σ_t v·mask / Σ_t mask]: every sequence counts once (verl `seq-mean-token-mean`)."""
    check_same_shape(values=values, mask=mask)
    mask = mask.to(values.dtype)
    if values.shape[0] == 0:
        return values.sum()
    return ((values * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)).mean()


def token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Σ v·mask / Σ mask over the whole mini-batch: every token counts once (verl `token-mean`)."""
    check_same_shape(values=values, mask=mask)
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp_min(1.0)


def sequence_policy_loss(*args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """(ℒ, J per sample (B,)) of one mini-batch (spec §2.5): ℒ = −(1/|M|) Σ_{y∈M} J(y), J from
    `sequence_policy_terms` called with the same arguments."""
    objective = sequence_policy_terms(*args, **kwargs).objective
    return -objective.mean(), objective


@dataclass
class RowTerms:
    """What a sequence-level objective applied to each row (B,): the record the step logs, never recomputed."""

    objective: torch.Tensor
    """J per row."""
    weight: torch.Tensor
    """The factor J multiplies the row's (clipped) ratio·A by: ρ(j→k)·sg[c]^α on HACPO cross rows (ρ = 1 with ω
    off, α = 0 with exponential IS off, c = s with the clip off), 1 on self rows and on Naive's cross rows."""
    in_window: torch.Tensor
    """bool: J depends on s here, i.e. the row's gradient is not clipped away: L_u ≤ s ≤ 1 on HACPO cross rows
    (every row with the clip off), the PPO min taking s·A on GSPO rows (self rows, Naive's cross rows)."""


def sequence_policy_terms(
    s: torch.Tensor,
    advantages: torch.Tensor,
    is_self: torch.Tensor,
    loss_weight: torch.Tensor | float = 1.0,
    alpha: torch.Tensor | float = 0.0,
    lower_bound: float = 0.8,
    *,
    hacpo_cross: bool = True,
    clip: bool = True,
    is_factor_on_raw_ratio: bool = False,
    eps_low: float = GSPO_EPS_LOW,
    eps_high: float = GSPO_EPS_HIGH,
) -> RowTerms:
    """J of every row of a mini-batch M at update u (spec §2.5) with the weight and window each row got
    (`RowTerms`); the policy loss is ℒ = −(1/|M|) Σ_{y∈M} J(y) (`sequence_policy_loss`).

    Self samples use `gspo_objective`. Cross samples use `cross_objective` when hacpo_cross is true (HACPO),
    otherwise `gspo_objective` too (Naive, spec §2.6). s, advantages, is_self (B,); loss_weight/alpha scalars or (B,)
    tensors (their values on self rows are ignored).
    """
    check_same_shape(s=s, advantages=advantages, is_self=is_self)
    own, own_window = _ppo_clip(s, advantages, eps_low, eps_high)
    ones = torch.ones_like(s.detach())
    if not hacpo_cross:  # Naive (spec §2.6): cross rows are GSPO rows
        return RowTerms(own, ones, own_window)
    cross, weight = _cross_terms(s, advantages, loss_weight, alpha, lower_bound, clip, is_factor_on_raw_ratio)
    cross_window = inside_window(s.detach(), lower_bound, 1.0) if clip else torch.ones_like(own_window)
    return RowTerms(
        objective=torch.where(is_self, own, cross),
        weight=torch.where(is_self, ones, weight.expand_as(ones)),
        in_window=torch.where(is_self, own_window, cross_window),
    )


def cross_window_share(s: torch.Tensor, lower_bound: float) -> torch.Tensor:
    """Fraction of cross ratios inside [L_u, 1], i.e. the share that receives gradient (diagnostic)."""
    if s.numel() == 0:
        return s.new_zeros(())
    return inside_window(s, lower_bound, 1.0).to(s.dtype).mean()
