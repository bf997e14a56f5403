"""HACPO / GSPO / GRPO math as small pure tensor functions (see docs/algorithm.md for the map to the paper).

No models, no I/O, no config objects. Spec references are to `hacpo-spec.md`.
"""

from hacrl_exp.algo.advantages import (
    TRL_ADVANTAGE_EPS,
    VERL_ADVANTAGE_EPS,
    bessel_std,
    capability_aware_advantages,
    capability_aware_baseline,
    group_relative_advantages,
)
from hacrl_exp.algo.algorithms import (
    ALGORITHMS,
    Algorithm,
    MechanismParams,
    check_hacpo_hyperparameters,
    get_algorithm,
    resolve_mechanisms,
)
from hacrl_exp.algo.capability import (
    CapabilityTracker,
    baseline_weights,
    capability_ratios,
)
from hacrl_exp.algo.clipping import MiniBatch, minibatch_schedule, stepwise_lower_bound
from hacrl_exp.algo.diagnostics import cross_row_statistics
from hacrl_exp.algo.losses import (
    cross_objective,
    cross_window_share,
    grpo_token_objective,
    gspo_objective,
    k3_kl,
    kl_penalty,
    ppo_clip_objective,
    seq_mean_token_mean,
    sequence_policy_loss,
    token_mean,
)
from hacrl_exp.algo.objectives import (
    Objective,
    ObjectiveParams,
    PolicyRows,
    grpo_objective,
    gspo_objective_loss,
    hacpo_objective,
)
from hacrl_exp.algo.ratios import clip_inclusive, inside_window, masked_mean, sequence_log_ratio

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "CapabilityTracker",
    "MechanismParams",
    "MiniBatch",
    "Objective",
    "ObjectiveParams",
    "PolicyRows",
    "TRL_ADVANTAGE_EPS",
    "VERL_ADVANTAGE_EPS",
    "baseline_weights",
    "bessel_std",
    "capability_aware_advantages",
    "capability_aware_baseline",
    "capability_ratios",
    "check_hacpo_hyperparameters",
    "clip_inclusive",
    "cross_objective",
    "cross_row_statistics",
    "cross_window_share",
    "get_algorithm",
    "group_relative_advantages",
    "grpo_objective",
    "grpo_token_objective",
    "gspo_objective",
    "gspo_objective_loss",
    "hacpo_objective",
    "inside_window",
    "k3_kl",
    "kl_penalty",
    "masked_mean",
    "minibatch_schedule",
    "ppo_clip_objective",
    "resolve_mechanisms",
    "seq_mean_token_mean",
    "sequence_log_ratio",
    "sequence_policy_loss",
    "stepwise_lower_bound",
    "token_mean",
]
