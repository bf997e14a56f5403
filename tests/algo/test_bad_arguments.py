"""Bad arguments raise ValueError and the message names the offending argument (hacrl_exp.algo._checks contract)."""

from __future__ import annotations

import math

import pytest
import torch
from algo_helpers import t

from hacrl_exp.algo import (
    CapabilityTracker,
    capability_aware_advantages,
    capability_aware_baseline,
    capability_ratios,
    check_hacpo_hyperparameters,
    cross_objective,
    get_algorithm,
    group_relative_advantages,
    grpo_token_objective,
    gspo_objective,
    k3_kl,
    masked_mean,
    minibatch_schedule,
    ppo_clip_objective,
    resolve_mechanisms,
    seq_mean_token_mean,
    sequence_log_ratio,
    sequence_policy_loss,
    stepwise_lower_bound,
    token_mean,
)
from hacrl_exp.config.schema import MechanismsConfig

REWARDS = t([[1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0]])  # TV-1 joint group, P = 1
SOURCE = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
WEIGHTS = t([1.0, 2.0 / 3.0])
S4 = t([0.9, 0.95, 1.0, 0.85])
A4 = t([1.0, -1.0, 1.0, 1.0])
CROSS4 = torch.zeros(4, dtype=torch.bool)


# ---------------------------------------------------------------------------------------------------
# Mismatched shapes
# ---------------------------------------------------------------------------------------------------


def test_shape_rewards_not_2d():
    with pytest.raises(ValueError, match="rewards"):
        capability_aware_advantages(REWARDS[0], SOURCE, 0, WEIGHTS)


def test_shape_source_length_differs_from_rewards():
    with pytest.raises(ValueError, match="source"):
        capability_aware_advantages(REWARDS, SOURCE[:5], 0, WEIGHTS)
    with pytest.raises(ValueError, match="source"):
        capability_aware_baseline(REWARDS, SOURCE.unsqueeze(0), 0, WEIGHTS)


@pytest.mark.parametrize(
    ("n_prompts", "weight_shape"),
    [(1, (3, 2)), (2, (3, 2)), (2, (2, 2, 2))],
    ids=["P1_weights_3_rows", "P2_weights_3_rows", "weights_3d"],
)
def test_shape_baseline_weight_rows_differ_from_prompts(n_prompts, weight_shape):
    """baseline_weight must be (N,) or (P, N). Library bug: (3, 2) with P = 1 silently returns (3, M) advantages."""
    rewards = REWARDS.repeat(n_prompts, 1)
    with pytest.raises(ValueError, match="baseline_weight"):
        capability_aware_advantages(rewards, SOURCE, 0, torch.ones(weight_shape, dtype=torch.float64))


@pytest.mark.parametrize(("source", "learner"), [(SOURCE + 1, 1), (SOURCE * 2, 0)], ids=["ids_1_2", "ids_0_2"])
def test_shape_source_id_not_an_agent_index(source, learner):
    """A source id ≥ N (the length of baseline_weight) is a bad argument. Library bug: IndexError."""
    with pytest.raises(ValueError, match="source"):
        capability_aware_advantages(REWARDS, source, learner, WEIGHTS)


def test_shape_sequence_log_ratio():
    with pytest.raises(ValueError, match="source_old_mean_logp"):
        sequence_log_ratio(t([0.1, 0.2, 0.3]), t([0.1, 0.2]))


def test_shape_masked_mean():
    with pytest.raises(ValueError, match="mask"):
        masked_mean(torch.zeros(4, 5, dtype=torch.float64), torch.ones(4, 1, dtype=torch.bool))


def test_shape_k3_kl():
    with pytest.raises(ValueError, match="ref_logp"):
        k3_kl(torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 1, dtype=torch.float64))


def test_shape_gspo_objective():
    with pytest.raises(ValueError, match="advantages"):
        gspo_objective(S4, A4[:3])


def test_shape_cross_objective_s_and_advantages():
    with pytest.raises(ValueError, match="advantages"):
        cross_objective(S4, A4[:3], 1.5, 1.0, 0.8)


@pytest.mark.parametrize("shape", [(3,), (4, 1)], ids=["B3_for_B4", "column_4x1"])
def test_shape_cross_objective_loss_weight(shape):
    """loss_weight is a scalar or (B,).

    Library bug: (3,) raises RuntimeError; (4, 1) is accepted and silently gives J of shape (4, 4).
    """
    with pytest.raises(ValueError, match="loss_weight"):
        cross_objective(S4, A4, torch.full(shape, 1.5, dtype=torch.float64), 1.0, 0.8)


def test_shape_cross_objective_alpha():
    """alpha is a scalar or (B,). Library bug: (3,) raises RuntimeError instead of ValueError."""
    with pytest.raises(ValueError, match="alpha"):
        cross_objective(S4, A4, 1.5, torch.ones(3, dtype=torch.float64), 0.8)


def test_shape_sequence_policy_loss_is_self():
    with pytest.raises(ValueError, match="is_self"):
        sequence_policy_loss(S4, A4, CROSS4[:3])


def test_shape_sequence_policy_loss_loss_weight():
    """Library bug: loss_weight (3,) for B = 4 raises RuntimeError instead of ValueError."""
    with pytest.raises(ValueError, match="loss_weight"):
        sequence_policy_loss(S4, A4, CROSS4, torch.full((3,), 1.5, dtype=torch.float64), 1.0, 0.8)


@pytest.mark.parametrize("reducer", [seq_mean_token_mean, token_mean], ids=["seq_mean_token_mean", "token_mean"])
@pytest.mark.parametrize("mask_shape", [(2, 1), (3, 5)], ids=["mask_2x1", "mask_3x5"])
def test_shape_loss_aggregation_mask(reducer, mask_shape):
    """values and mask must have the same shape.

    Library bug: no shape check; a (2, 1) mask broadcasts silently (seq_mean_token_mean gives 22.5, not 4.5).
    """
    values = torch.arange(10, dtype=torch.float64).reshape(2, 5)
    with pytest.raises(ValueError, match="mask"):
        reducer(values, torch.ones(mask_shape, dtype=torch.bool))


@pytest.mark.parametrize("adv_shape", [(3,), (4, 5)], ids=["B3_for_B4", "per_token"])
def test_shape_grpo_token_objective_advantages(adv_shape):
    """advantages must be (B,) for log_ratio (B, T). Library bug: RuntimeError instead of ValueError."""
    with pytest.raises(ValueError, match="advantages"):
        grpo_token_objective(torch.zeros(4, 5, dtype=torch.float64), torch.ones(adv_shape, dtype=torch.float64))


def test_shape_ppo_clip_objective():
    with pytest.raises(ValueError, match="advantages"):
        ppo_clip_objective(S4, A4[:2], 0.2, 0.28)


# ---------------------------------------------------------------------------------------------------
# alpha < 0, delta outside [0, 1), delta_step < 0
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [-1.0, -1e-9, -math.inf])
def test_alpha_negative(alpha):
    with pytest.raises(ValueError, match="alpha"):
        check_hacpo_hyperparameters(alpha, 0.2, 0.025)
    with pytest.raises(ValueError, match="alpha"):
        resolve_mechanisms(MechanismsConfig(), get_algorithm("hacpo"), {1: 1.0, 2: alpha}, 0.025)
    with pytest.raises(ValueError, match="alpha"):
        cross_objective(S4, A4, 1.5, alpha, 0.8)
    with pytest.raises(ValueError, match="alpha"):
        sequence_policy_loss(S4, A4, CROSS4, 1.5, alpha, 0.8)


def test_alpha_negative_entry_in_per_sample_tensor():
    with pytest.raises(ValueError, match="alpha"):
        cross_objective(S4, A4, 1.5, t([1.0, 1.0, -0.5, 1.0]), 0.8)


def test_alpha_nan():
    with pytest.raises(ValueError, match="alpha"):
        check_hacpo_hyperparameters(math.nan, 0.2, 0.025)


@pytest.mark.parametrize("delta", [1.0, -0.1, 1.5, math.nan])
def test_delta_outside_unit_interval(delta):
    with pytest.raises(ValueError, match="delta"):
        stepwise_lower_bound(0, delta)
    with pytest.raises(ValueError, match="delta"):
        check_hacpo_hyperparameters(1.0, delta, 0.025)


@pytest.mark.parametrize("delta_step", [-0.025, -1e-12, math.inf])
def test_delta_step_negative(delta_step):
    with pytest.raises(ValueError, match="delta_step"):
        stepwise_lower_bound(0, 0.2, delta_step)
    with pytest.raises(ValueError, match="delta_step"):
        check_hacpo_hyperparameters(1.0, 0.2, delta_step)
    with pytest.raises(ValueError, match="delta_step"):
        resolve_mechanisms(MechanismsConfig(), get_algorithm("hacpo"), {1: 1.0}, delta_step)


@pytest.mark.parametrize("u", [-1, 1.5, True])
def test_update_index_not_a_nonnegative_int(u):
    with pytest.raises(ValueError, match="u="):
        stepwise_lower_bound(u)


# ---------------------------------------------------------------------------------------------------
# Capability tracker: K < 1, n_agents < 1, accuracy outside [0, 1], other settings
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("window", [0, -1, 2.5])
def test_window_below_one(window):
    with pytest.raises(ValueError, match="window"):
        CapabilityTracker(2, window=window)


@pytest.mark.parametrize("n_agents", [0, -1])
def test_n_agents_below_one(n_agents):
    with pytest.raises(ValueError, match="n_agents"):
        CapabilityTracker(n_agents)


@pytest.mark.parametrize("bad", [1.2, -0.1, math.nan, math.inf])
def test_accuracy_outside_unit_interval(bad):
    tracker = CapabilityTracker(2)
    with pytest.raises(ValueError, match=r"accuracy\[1\]"):
        tracker.update([0.5, bad])
    assert tracker.steps == 0 and len(tracker.history) == 0  # nothing was recorded


def test_accuracy_wrong_length():
    with pytest.raises(ValueError, match="accuracy"):
        CapabilityTracker(2).update([0.5])


@pytest.mark.parametrize("floor", [0.0, -1e-8, 2.0])
def test_tracker_floor_not_positive(floor):
    with pytest.raises(ValueError, match="floor"):
        CapabilityTracker(2, floor=floor)


@pytest.mark.parametrize("clip", [(2.0, 10.0), (0.0, 10.0), (0.1, 0.5)])
def test_tracker_clip_range(clip):
    with pytest.raises(ValueError, match="clip"):
        CapabilityTracker(2, clip=clip)
    with pytest.raises(ValueError, match="clip"):
        capability_ratios(t([0.5, 0.75]), clip)


def test_tracker_warmup_negative():
    with pytest.raises(ValueError, match="warmup_steps"):
        CapabilityTracker(2, warmup_steps=-1)


def test_capability_ratios_p_hat_not_positive():
    with pytest.raises(ValueError, match="p_hat"):
        capability_ratios(t([0.0, 0.5]))


@pytest.mark.parametrize(
    "state",
    [{"history": [[0.5, 0.5, 0.5]], "steps": 1}, {"history": [[0.5, 0.5]] * 6, "steps": 6}],
    ids=["wrong_n_agents", "longer_than_window"],
)
def test_tracker_load_state_dict_mismatch(state):
    with pytest.raises(ValueError, match="n_agents/window"):
        CapabilityTracker(2, window=5).load_state_dict(state)


# ---------------------------------------------------------------------------------------------------
# Advantages: G < 2 for the Bessel std, learner index out of range, eps < 0
# ---------------------------------------------------------------------------------------------------


def test_group_of_one_for_bessel_std():
    with pytest.raises(ValueError, match="rewards"):
        group_relative_advantages(t([[1.0], [0.0]]))
    with pytest.raises(ValueError, match="rewards"):
        capability_aware_advantages(t([[1.0]]), torch.tensor([0]), 0, t([1.0]))


@pytest.mark.parametrize("learner", [2, 5, -1])
def test_learner_index_out_of_range(learner):
    with pytest.raises(ValueError, match="learner"):
        capability_aware_advantages(REWARDS, SOURCE, learner, WEIGHTS)
    with pytest.raises(ValueError, match="learner"):
        capability_aware_baseline(REWARDS, SOURCE, learner, WEIGHTS)


def test_learner_without_own_responses():
    with pytest.raises(ValueError, match="learner"):
        capability_aware_advantages(REWARDS, torch.ones(8, dtype=torch.long), 0, WEIGHTS)


@pytest.mark.parametrize("eps", [-1e-6, math.nan])
def test_advantage_eps_negative(eps):
    with pytest.raises(ValueError, match="eps"):
        group_relative_advantages(REWARDS, eps)
    with pytest.raises(ValueError, match="eps"):
        capability_aware_advantages(REWARDS, SOURCE, 0, WEIGHTS, eps)


# ---------------------------------------------------------------------------------------------------
# Clip settings, schedule, registry
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("eps_low", "eps_high", "name"), [(-3e-4, 4e-4, "eps_low"), (3e-4, -4e-4, "eps_high")])
def test_self_clip_eps_negative(eps_low, eps_high, name):
    with pytest.raises(ValueError, match=name):
        gspo_objective(S4, A4, eps_low, eps_high)


@pytest.mark.parametrize("dual_clip", [1.0, 0.5])
def test_grpo_dual_clip_not_above_one(dual_clip):
    with pytest.raises(ValueError, match="dual_clip"):
        grpo_token_objective(torch.zeros(4, 5, dtype=torch.float64), A4, dual_clip=dual_clip)


@pytest.mark.parametrize("size", [0, -4])
def test_minibatch_size_below_one(size):
    with pytest.raises(ValueError, match="minibatch_size"):
        minibatch_schedule([8, 8], size)


@pytest.mark.parametrize("blocks", [[], [8, -1]])
def test_minibatch_block_sizes_invalid(blocks):
    with pytest.raises(ValueError, match="block_sizes"):
        minibatch_schedule(blocks, 4)


def test_minibatch_restart_needs_whole_minibatches():
    with pytest.raises(ValueError, match="block_sizes"):
        minibatch_schedule([8, 6], 4, restart_per_source=True)


@pytest.mark.parametrize("name", ["foo", "HACPO", "", "gspo-x2"])
def test_unknown_algorithm_name(name):
    with pytest.raises(ValueError, match="algorithm"):
        get_algorithm(name)
