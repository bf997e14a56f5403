"""Importance ratios (hacpo-spec §1.4, §2.3, §3.1) and the clip helper with explicit bound convention.

A sequence is summarised by m = its mean token log-prob. For learner k and a response from source j
the two means run over *different* tokenisations: |y|_k tokens in the numerator, |y|_j in the
denominator (spec §2.3, §7.11).
"""

from __future__ import annotations

import torch

from hacrl_exp.algo._checks import check_same_shape

MAX_ABS_LOG_RATIO = 10.0


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence token mean m = Σ_t v_t·mask_t / Σ_t mask_t. values, mask (B, T) → (B,).

    A sequence with no valid token yields 0 rather than NaN.
    """
    check_same_shape(values=values, mask=mask)
    mask = mask.to(values.dtype)
    return (values * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)


def sequence_log_ratio(
    learner_mean_logp: torch.Tensor,
    source_old_mean_logp: torch.Tensor,
    min_log_ratio: float | None = -MAX_ABS_LOG_RATIO,
    max_log_ratio: float | None = MAX_ABS_LOG_RATIO,
) -> torch.Tensor:
    """log s = m_k(y) − m_src_old(y), clamped to [min, max] (spec §2.3; paper eq. 11 in log space).

        s = ( π^(k)_θ(y) / π^(j)_old(y) )^(1/|y|)   with separate |y|_k and |y|_j normalisers

    Inputs (B,); the gradient flows into `learner_mean_logp` only. The default clamp ±10 is the
    verl-v1 port's (C1); pass min_log_ratio=None for the official code's upper-only clamp (C0).
    For self samples m_src_old is the learner's own pre-update mean, so this is GSPO's ratio (§3.1).
    """
    check_same_shape(learner_mean_logp=learner_mean_logp, source_old_mean_logp=source_old_mean_logp)
    log_ratio = learner_mean_logp - source_old_mean_logp.detach()
    if min_log_ratio is not None or max_log_ratio is not None:
        log_ratio = log_ratio.clamp(min=min_log_ratio, max=max_log_ratio)
    return log_ratio


def clip_inclusive(x: torch.Tensor, low: float | torch.Tensor, high: float | torch.Tensor) -> torch.Tensor:
    """clip(x, low, high) whose gradient is 1 on [low, high] *including both bounds* and 0 outside.

    torch.clamp's gradient exactly at a bound differs across torch releases (spec §9.9); masks fix it.
    """
    low_t = torch.as_tensor(low, dtype=x.dtype, device=x.device)
    high_t = torch.as_tensor(high, dtype=x.dtype, device=x.device)
    return torch.where(x < low_t, low_t, torch.where(x > high_t, high_t, x))


def inside_window(x: torch.Tensor, low: float | torch.Tensor, high: float | torch.Tensor) -> torch.Tensor:
    """Boolean mask of low ≤ x ≤ high: where `clip_inclusive` passes gradient."""
    return (x >= low) & (x <= high)
