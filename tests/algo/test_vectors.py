"""Every number of hacpo-spec §8 (test vectors TV-1 … TV-6) and the clip-bound convention of §9.9.

All tensors are float64; tolerance 1e-9 relative (spec §8). Numbers the spec prints rounded (e.g. "0.666667")
are checked twice: against the exact value at 1e-9 and against the printed digits at half a unit of the last
place. Gradients are ∂Loss/∂m (m = the learner's mean token log-prob) unless a test says "per token".
"""

from __future__ import annotations

import math

import pytest
import torch
from algo_helpers import (
    TV1_ACC_A,
    TV1_ACC_B,
    TV1_C1_INDEX,
    TV1_C1_LEARNER_TOKENS,
    TV1_C1_SOURCE_TOKENS,
    TV1_M_CUR,
    TV1_M_OLD,
    close,
    close_printed,
    t,
)

from hacrl_exp.algo import (
    TRL_ADVANTAGE_EPS,
    VERL_ADVANTAGE_EPS,
    CapabilityTracker,
    bessel_std,
    capability_aware_advantages,
    capability_aware_baseline,
    clip_inclusive,
    cross_objective,
    cross_window_share,
    get_algorithm,
    group_relative_advantages,
    gspo_objective,
    inside_window,
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

# ===================================================================================================
# TV-1: two agents, one prompt, G = 4 each, learner = A (agent 0), other = B (agent 1)
# ===================================================================================================

TV1_SIGMA = 0.5175491695067657
TV1_A_POS = 0.9660899164162359  # learner A, R = 1
TV1_B_POS = 0.48304495820811794  # learner B, R = 1
TV1_B_NEG = -1.449134874624354  # learner B, R = 0

TV1_LOG_S = [0.0002, 0.0010, -0.0010, 0.0010, -0.15, -0.20, 0.02, -0.03]
TV1_S = [
    1.0002000200013335,
    1.0010005001667084,
    0.999000499833375,
    1.0010005001667084,
    0.8607079764250578,
    0.8187307530779818,
    1.0202013400267558,
    0.9704455335485082,
]

TV1_J_SELF = [0.9662831537226056, -0.9670564895386656, -0.965800089441311, 0.9664763523828023]
TV1_J = {
    "alpha1_u2": TV1_J_SELF + [1.0735455193470382, 1.0469999469160958, -1.4491348746243538, 1.3647438293012732],
    "alpha1_u0": TV1_J_SELF + [1.0735455193470382, 0.9713841558700471, -1.4491348746243538, 1.3647438293012732],
    "alpha3_u2": TV1_J_SELF + [0.7953020814635036, 0.7564574616468794, -1.4491348746243538, 1.285267335863895],
}
TV1_CASE_A = {  # (alpha, u): (Loss, ∂Loss/∂m)
    (1, 2): (
        -0.2545071685081856,
        [-0.1207853942153257, 0.1208820611923332, 0, 0, -0.13419318991837975, 0, 0, -0.17059297866265913],
    ),
    (1, 0): (
        -0.24505519462742953,
        [
            -0.1207853942153257,
            0.1208820611923332,
            0,
            0,
            -0.13419318991837975,
            -0.12142301948375589,
            0,
            -0.17059297866265913,
        ],
    ),
    (3, 2): (
        -0.17347436643441944,
        [-0.1207853942153257, 0.1208820611923332, 0, 0, -0.09941276018293793, 0, 0, -0.16065841698298688],
    ),
}


def tv1_loss(adv, loss_weight, alpha, u, rows=slice(None), is_self=None, **kwargs):
    """Forward/backward of TV-1 rows `rows` through the library; returns (loss, J, ∂Loss/∂m)."""
    m = t(TV1_M_CUR)[rows].clone().requires_grad_(True)
    m_old = t(TV1_M_OLD)[rows]
    if is_self is None:
        is_self = (torch.arange(8) < 4)[rows]
    s = sequence_log_ratio(m, m_old).exp()
    loss, objective = sequence_policy_loss(
        s,
        adv[rows],
        is_self,
        loss_weight=loss_weight[rows],
        alpha=alpha,
        lower_bound=stepwise_lower_bound(u),
        **kwargs,
    )
    loss.backward()
    return loss, objective, m.grad


def tv1_token_batch(requires_grad: bool = True):
    """TV-1 as padded token matrices: c1 has 6 learner tokens and 5 source tokens, every other row 1 token.

    Returns (learner tokens (8, 6) leaf, learner mask, source tokens (8, 5), source mask).
    """
    learner = torch.zeros(8, 6, dtype=torch.float64)
    learner_mask = torch.zeros(8, 6, dtype=torch.bool)
    source = torch.zeros(8, 5, dtype=torch.float64)
    source_mask = torch.zeros(8, 5, dtype=torch.bool)
    for i in range(8):
        if i == TV1_C1_INDEX:
            learner[i] = t(TV1_C1_LEARNER_TOKENS)
            learner_mask[i] = True
            source[i] = t(TV1_C1_SOURCE_TOKENS)
            source_mask[i] = True
        else:
            learner[i, 0] = TV1_M_CUR[i]
            learner_mask[i, 0] = True
            source[i, 0] = TV1_M_OLD[i]
            source_mask[i, 0] = True
    return learner.requires_grad_(requires_grad), learner_mask, source, source_mask


# --- capability windows, ρ and baseline weights ------------------------------------------------------


def test_tv1_capability_windows(tv1_tracker):
    close(tv1_tracker.p_hat(), [0.5, 0.75])
    assert [h for h in tv1_tracker.history] == [list(p) for p in zip(TV1_ACC_A, TV1_ACC_B, strict=True)]


def test_tv1_loss_weight_rho_b_to_a_is_1_5(tv1_tracker):
    rho = tv1_tracker.loss_weights()
    close(rho[0, 1], 1.5)  # ρ(B→A): loss weight on B's samples when A learns
    close(rho[0, 0], 1.0)


def test_tv1_baseline_weight_of_b_for_learner_a(tv1_tracker):
    w = tv1_tracker.baseline_weights()
    close(w[0, 1], 2.0 / 3.0)
    close_printed(w[0, 1], 0.666667, 6)
    close(w[0, 0], 1.0)


def test_tv1_learner_b_rho_and_baseline_weight(tv1_tracker):
    close(tv1_tracker.loss_weights()[1, 0], 2.0 / 3.0)  # ρ(A→B)
    close_printed(tv1_tracker.loss_weights()[1, 0], 0.666667, 6)
    close(tv1_tracker.baseline_weights()[1, 0], 1.5)
    close(tv1_tracker.loss_weights()[1, 1], 1.0)


# --- advantages -----------------------------------------------------------------------------------


def test_tv1_sigma_bessel(tv1_rewards):
    close(bessel_std(tv1_rewards), [[TV1_SIGMA]])


def test_tv1_advantages_learner_a(tv1_tracker, tv1_rewards, tv1_source, tv1_adv_a):
    mu = capability_aware_baseline(tv1_rewards, tv1_source, 0, tv1_tracker.baseline_weights()[0])
    close(mu, [[0.5]])
    # order: A-self [+, −, −, +], B-cross [+, +, −, +]
    p, n = TV1_A_POS, -TV1_A_POS
    close(tv1_adv_a, [p, n, n, p, p, p, n, p])


def test_tv1_advantages_learner_b(tv1_tracker, tv1_rewards, tv1_source):
    weights = tv1_tracker.baseline_weights()[1]
    close(capability_aware_baseline(tv1_rewards, tv1_source, 1, weights), [[0.75]])
    adv = capability_aware_advantages(tv1_rewards, tv1_source, 1, weights)[0]
    p, n = TV1_B_POS, TV1_B_NEG
    close(adv[4:], [p, p, n, p])  # B-self
    close(adv[:4], [p, n, n, p])  # A-cross


def test_tv1_naive_joint_advantages(tv1_tracker, tv1_rewards, tv1_source):
    """Naive / "−Adv": the unweighted joint baseline μ = 0.625 (baseline weights all ones)."""
    ones = torch.ones(2, dtype=torch.float64)
    close(capability_aware_baseline(tv1_rewards, tv1_source, 0, ones), [[0.625]])
    p, n = 0.724567437312177, -1.2076123955202949
    expected = [p, n, n, p, p, p, n, p]
    close(capability_aware_advantages(tv1_rewards, tv1_source, 0, ones)[0], expected)
    no_adv = resolve_mechanisms(
        MechanismsConfig(capability_advantage=False), get_algorithm("hacpo"), {1: 1.0}, 0.025
    ).baseline_weight(tv1_tracker.baseline_weights()[0])
    close(capability_aware_advantages(tv1_rewards, tv1_source, 0, no_adv)[0], expected)


def test_tv1_single_agent_grpo():
    adv = group_relative_advantages(t([[1.0, 0.0, 0.0, 1.0]]))
    v = 0.8660239037870368
    close(adv, [[v, -v, -v, v]])


# --- sequence ratios --------------------------------------------------------------------------------


def test_tv1_log_ratio_and_ratio_columns(tv1_m_old):
    log_s = sequence_log_ratio(t(TV1_M_CUR), tv1_m_old)
    close(log_s, TV1_LOG_S)
    close(log_s.exp(), TV1_S)


def test_tv1_c1_separate_length_normalisation():
    """c1: the numerator mean runs over A's 6 tokens, the denominator mean over B's 5 tokens."""
    learner, learner_mask, source, source_mask = tv1_token_batch(requires_grad=False)
    m = masked_mean(learner, learner_mask)
    m_old = masked_mean(source, source_mask)
    close(m, TV1_M_CUR)
    close(m_old, TV1_M_OLD)
    close(m[TV1_C1_INDEX], -0.35)
    close(m_old[TV1_C1_INDEX], -0.20)
    close(sequence_log_ratio(m, m_old)[TV1_C1_INDEX], -0.15)


# --- per-sample objectives J_i ---------------------------------------------------------------------


@pytest.mark.parametrize(("alpha", "u", "key"), [(1, 2, "alpha1_u2"), (1, 0, "alpha1_u0"), (3, 2, "alpha3_u2")])
def test_tv1_objective_table(tv1_adv_a, tv1_loss_weight, alpha, u, key):
    _, objective, _ = tv1_loss(tv1_adv_a, tv1_loss_weight, alpha, u)
    close(objective, TV1_J[key])


def test_tv1_clip_states_u2():
    """Clip-state column: c1, c4 in [0.85, 1]; c2 below L_2; c3 above 1. Self window [0.9997, 1.0004]."""
    s = t(TV1_S)
    assert inside_window(s[4:], stepwise_lower_bound(2), 1.0).tolist() == [True, False, False, True]
    assert inside_window(s[4:], stepwise_lower_bound(0), 1.0).tolist() == [True, True, False, True]
    close(cross_window_share(s[4:], stepwise_lower_bound(2)), 0.5)
    assert inside_window(s[:4], 1 - 3e-4, 1 + 4e-4).tolist() == [True, False, False, False]


def test_tv1_c2_clipped_at_lower_bound_value():
    """J_6 at u = 2 is c = 0.85 times sg[c]^1 · ρ · A."""
    close(TV1_J["alpha1_u2"][5], 0.85 * 0.85 * 1.5 * TV1_A_POS)


# --- case A: all 8 samples in one mini-batch -------------------------------------------------------


def _check_case_a(adv, loss_weight, alpha, u):
    loss, _, grad = tv1_loss(adv, loss_weight, alpha, u)
    expected_loss, expected_grad = TV1_CASE_A[(alpha, u)]
    close(loss, expected_loss)
    close(grad, expected_grad)


def test_tv1_case_a_alpha1_u2(tv1_adv_a, tv1_loss_weight):
    _check_case_a(tv1_adv_a, tv1_loss_weight, 1, 2)


def test_tv1_case_a_alpha1_u0(tv1_adv_a, tv1_loss_weight):
    _check_case_a(tv1_adv_a, tv1_loss_weight, 1, 0)


def test_tv1_case_a_alpha3_u2(tv1_adv_a, tv1_loss_weight):
    _check_case_a(tv1_adv_a, tv1_loss_weight, 3, 2)


def test_tv1_case_a_in_range_cross_gradient_formula():
    """∂Loss/∂m = −(1/8)·s^(α+1)·ρ·A for in-range cross samples; i = 5, α = 1 gives −0.134193."""
    value = -(1 / 8) * TV1_S[4] ** 2 * 1.5 * TV1_A_POS
    close(value, TV1_CASE_A[(1, 2)][1][4])
    close_printed(value, -0.134193, 6)


@pytest.mark.parametrize(("alpha", "expected"), [(1, -0.022365531653063292), (3, -0.016568793363822987)])
def test_tv1_case_a_c1_per_token_gradient_u2(tv1_adv_a, tv1_loss_weight, alpha, expected):
    """Per-token gradient of c1 = (1/6)·∂Loss/∂m on each of A's 6 tokens (tokens are leaves, via masked_mean)."""
    learner, learner_mask, source, source_mask = tv1_token_batch()
    m = masked_mean(learner, learner_mask)
    s = sequence_log_ratio(m, masked_mean(source, source_mask)).exp()
    loss, _ = sequence_policy_loss(
        s, tv1_adv_a, torch.arange(8) < 4, tv1_loss_weight, alpha=alpha, lower_bound=stepwise_lower_bound(2)
    )
    loss.backward()
    close(loss, TV1_CASE_A[(alpha, 2)][0])
    close(learner.grad[TV1_C1_INDEX], [expected] * 6)
    close(expected, TV1_CASE_A[(alpha, 2)][1][TV1_C1_INDEX] / 6)
    # every single-token row carries ∂Loss/∂m itself, and padding gets nothing
    others = [i for i in range(8) if i != TV1_C1_INDEX]
    close(learner.grad[others, 0], [TV1_CASE_A[(alpha, 2)][1][i] for i in others])
    close(learner.grad[others, 1:], torch.zeros(7, 5))


# --- case B: C1 layout (self mini-batch at u = 0, cross mini-batch at u = 2) -----------------------


def test_tv1_case_b_self_minibatch_u0(tv1_adv_a, tv1_loss_weight):
    loss, _, grad = tv1_loss(tv1_adv_a, tv1_loss_weight, 1, 0, rows=slice(0, 4))
    close(loss, 2.426821864218165e-05)
    close(grad, [-0.2415707884306514, 0.2417641223846664, 0, 0])
    close(grad, [2 * g for g in TV1_CASE_A[(1, 2)][1][:4]])


def test_tv1_case_b_cross_minibatch_u2_alpha1(tv1_adv_a, tv1_loss_weight):
    loss, _, grad = tv1_loss(tv1_adv_a, tv1_loss_weight, 1, 2, rows=slice(4, 8))
    close(loss, -0.5090386052350133)
    close(grad, [-0.2683863798367595, 0, 0, -0.34118595732531826])
    close(grad, [2 * g for g in TV1_CASE_A[(1, 2)][1][4:]])


def test_tv1_case_b_cross_minibatch_u2_alpha3(tv1_adv_a, tv1_loss_weight):
    loss, _, grad = tv1_loss(tv1_adv_a, tv1_loss_weight, 3, 2, rows=slice(4, 8))
    close(loss, -0.3469730010874811)
    close(grad, [-0.19882552036587586, 0, 0, -0.32131683396597377])
    close(grad, [2 * g for g in TV1_CASE_A[(3, 2)][1][4:]])


def test_tv1_case_b_c1_schedule_puts_cross_in_u2_u3():
    """Spec §1.6 (C1): n = 2, 1024 sequences per source block, 512 per update → self u = 0, 1; cross u = 2, 3."""
    schedule = minibatch_schedule([1024, 1024], 512)
    assert [(mb.start, mb.stop, mb.u) for mb in schedule] == [
        (0, 512, 0),
        (512, 1024, 1),
        (1024, 1536, 2),
        (1536, 2048, 3),
    ]
    close([stepwise_lower_bound(mb.u) for mb in schedule[2:]], [0.85, 0.875])


# --- case C: PAPER-LIT (sg[s]^α on the unclipped s) -----------------------------------------------


def test_tv1_case_c_paper_literal_alpha1_u2(tv1_adv_a, tv1_loss_weight):
    loss, objective, grad = tv1_loss(tv1_adv_a, tv1_loss_weight, 1, 2, is_factor_on_raw_ratio=True)
    expected = list(TV1_J["alpha1_u2"])
    expected[5] = 1.0084835941308494
    expected[6] = -1.4784093409712704
    close(objective, expected)
    close(expected[5], 0.85 * TV1_S[5] * 1.5 * TV1_A_POS)
    close(expected[6], 1.0 * TV1_S[6] * 1.5 * -TV1_A_POS)
    close(loss, -0.24603331611666523)
    close(grad, TV1_CASE_A[(1, 2)][1])  # gradients identical to CODE


# --- case D: "−ω" ablation (loss weight 1) ---------------------------------------------------------


def test_tv1_case_d_omega_ablation_alpha1_u2(tv1_adv_a, tv1_loss_weight):
    expected = [0.7156970128980255, 0.6979999646107303, -0.9660899164162359, 0.9098292195341822]
    _, objective, _ = tv1_loss(tv1_adv_a, torch.ones(8, dtype=torch.float64), 1, 2)
    close(objective[4:], expected)
    no_omega = resolve_mechanisms(MechanismsConfig(omega=False), get_algorithm("hacpo"), {1: 1.0}, 0.025).loss_weight(
        tv1_loss_weight
    )
    _, objective, _ = tv1_loss(tv1_adv_a, no_omega, 1, 2)
    close(objective[4:], expected)
    close(objective[:4], TV1_J_SELF)


# --- case E: equivalence of the verl per-token construction and the direct formula ----------------


def test_tv1_case_e_verl_per_token_construction(tv1_adv_a):
    """C0's per-token ratio sg[s]·π_t/sg[π_t], clipped per token, aggregated seq-mean-token-mean."""
    tokens = t(TV1_C1_LEARNER_TOKENS, requires_grad=True)
    m_old = t(TV1_C1_SOURCE_TOKENS).mean()
    log_s = tokens.mean() - m_old
    ratio = torch.exp(tokens - tokens.detach() + log_s.detach())
    c = torch.clamp(ratio, 0.85, 1.0)  # s = 0.8607 is strictly inside, so clamp's bound rule does not matter
    per_token = c * c.detach() ** 1 * 1.5 * tv1_adv_a[TV1_C1_INDEX]
    loss = -seq_mean_token_mean(per_token.unsqueeze(0), torch.ones(1, 6, dtype=torch.bool))
    loss.backward()
    close(loss, -1.0735455193470378)
    close(tokens.grad, [-0.17892425322450634] * 6)


def test_tv1_case_e_direct_formula(tv1_adv_a):
    """The library path: masked_mean over A's 6 token leaves → m → s → sequence_policy_loss."""
    tokens = t([TV1_C1_LEARNER_TOKENS], requires_grad=True)
    m = masked_mean(tokens, torch.ones(1, 6, dtype=torch.bool))
    m_old = masked_mean(t([TV1_C1_SOURCE_TOKENS]), torch.ones(1, 5, dtype=torch.bool))
    s = sequence_log_ratio(m, m_old).exp()
    adv = tv1_adv_a[TV1_C1_INDEX : TV1_C1_INDEX + 1]
    loss, _ = sequence_policy_loss(s, adv, torch.tensor([False]), 1.5, alpha=1, lower_bound=0.85)
    loss.backward()
    close(loss, -1.0735455193470382)
    close(tokens.grad, [[-0.17892425322450634] * 6])
    close(loss, -1.0735455193470378, rtol=0, atol=5e-16)  # "They agree to 4e-16" (4.44e-16, one ulp-scale step)


# ===================================================================================================
# TV-2: advantage edge cases (learner k = 0, G = 4 + 4)
# ===================================================================================================

TV2_SOURCE = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
TV2_SIGMA = 0.5345224838248488


@pytest.mark.parametrize("value", [0.0, 1.0])
@pytest.mark.parametrize("weight", [0.1, 2.0 / 3.0, 1.0, 1.5, 10.0, 15.0])
def test_tv2_uniform_group_zero_advantage(value, weight):
    rewards = torch.full((1, 8), value, dtype=torch.float64)
    adv = capability_aware_advantages(rewards, TV2_SOURCE, 0, t([1.0, weight]))
    assert torch.equal(adv, torch.zeros(1, 8, dtype=torch.float64))
    close(capability_aware_baseline(rewards, TV2_SOURCE, 0, t([1.0, weight])), [[value]])


def test_tv2_guard_capability_ratio_clipped_to_0_1():
    """P̂_k = 0.9, P̂_j = 0.06: ρ(j→k) = clip(0.0667) = 0.1, baseline weight 10 (the raw 15 is not used)."""
    tracker = CapabilityTracker(2)
    tracker.update([0.9, 0.06])
    p = tracker.p_hat()
    close(p, [0.9, 0.06])
    close(p[1] / p[0], 0.06 / 0.9)
    close_printed(p[1] / p[0], 0.0666667, 7)
    close(p[0] / p[1], 15.0)
    close(tracker.loss_weights()[0, 1], 0.1)
    close(tracker.baseline_weights()[0, 1], 10.0)


def test_tv2_guard_case_advantages():
    """Raw μ̂ = (3 + 10·1)/8 = 1.625 > 1 → μ̂ = the learner's own mean 0.75."""
    tracker = CapabilityTracker(2)
    tracker.update([0.9, 0.06])
    weights = tracker.baseline_weights()[0]
    rewards = t([[1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]])
    raw = capability_aware_baseline(rewards, TV2_SOURCE, 0, weights, guard=False)
    close(raw, [[1.625]])
    close(capability_aware_baseline(rewards, TV2_SOURCE, 0, weights), [[0.75]])
    close(bessel_std(rewards), [[TV2_SIGMA]])
    p, n = 0.4677062983483796, -1.4031188950451388
    close(capability_aware_advantages(rewards, TV2_SOURCE, 0, weights), [[p, p, p, n, p, n, n, n]])


def test_tv2_guard_case_paper_literal():
    """No clip, no guard, weight 15: μ̂ = 2.25 and every advantage is negative."""
    rewards = t([[1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]])
    weights = t([1.0, 15.0])
    mu = capability_aware_baseline(rewards, TV2_SOURCE, 0, weights, uniform_rule=False, guard=False)
    close(mu, [[2.25]])
    adv = capability_aware_advantages(rewards, TV2_SOURCE, 0, weights, uniform_rule=False, guard=False)
    p, n = -2.338531491741898, -4.2093566851354165
    close(adv, [[p, p, p, n, p, n, n, n]])
    assert bool((adv < 0).all())


@pytest.mark.parametrize("floor_entries", [False, True])
def test_tv2_zero_capability_floor(floor_entries):
    """P̂_j = 0 is floored to 1e-8: ρ(j→k) = clip(1e-8/0.5) = 0.1 and ρ(k→j) = 10."""
    tracker = CapabilityTracker(2, floor_entries=floor_entries)
    tracker.update([0.5, 0.0])
    close(tracker.p_hat(), [0.5, 1e-8])
    rho = tracker.loss_weights()
    close(rho[0, 1], 0.1)
    close(rho[1, 0], 10.0)
    assert bool(torch.isfinite(tracker.baseline_weights()).all())


# ===================================================================================================
# TV-3: capability tracker (K = 5, window includes the current step)
# ===================================================================================================

TV3_A = [0.30, 0.35, 0.40, 0.50, 0.55, 0.60, 0.65]
TV3_B = [0.02, 0.03, 0.05, 0.08, 0.10, 0.12, 0.15]
# step: (P̂_A, P̂_B, raw P̂_B/P̂_A, ρ(B→A), ρ(A→B), w of B in A's μ̂, w of A in B's μ̂), as printed
TV3_TABLE = {
    1: (0.3, 0.02, 0.066667, 0.1, 10.0, 10.0, 0.1),
    2: (0.325, 0.025, 0.076923, 0.1, 10.0, 10.0, 0.1),
    3: (0.35, 0.033333, 0.095238, 0.1, 10.0, 10.0, 0.1),
    4: (0.3875, 0.045, 0.116129, 0.116129, 8.611111, 8.611111, 0.116129),
    5: (0.42, 0.056, 0.133333, 0.133333, 7.5, 7.5, 0.133333),
    6: (0.48, 0.076, 0.158333, 0.158333, 6.315789, 6.315789, 0.158333),
    7: (0.54, 0.1, 0.185185, 0.185185, 5.4, 5.4, 0.185185),
}


def _window_mean(values, step, k=5):
    window = values[max(0, step - k) : step]
    return math.fsum(window) / len(window)


@pytest.mark.parametrize("step", sorted(TV3_TABLE))
def test_tv3_tracker_row(step):
    tracker = CapabilityTracker(2, window=5)
    for a, b in zip(TV3_A[:step], TV3_B[:step], strict=True):
        tracker.update([a, b])
    p = tracker.p_hat()
    rho, w = tracker.loss_weights(), tracker.baseline_weights()
    got = [p[0], p[1], p[1] / p[0], rho[0, 1], rho[1, 0], w[0, 1], w[1, 0]]
    # exact: window means and clip(P̂_B/P̂_A, 0.1, 10)
    pa, pb = _window_mean(TV3_A, step), _window_mean(TV3_B, step)
    rho_ba = min(10.0, max(0.1, pb / pa))
    rho_ab = min(10.0, max(0.1, pa / pb))
    for g, e in zip(got, [pa, pb, pb / pa, rho_ba, rho_ab, 1 / rho_ba, 1 / rho_ab], strict=True):
        close(g, e)
    # printed (6 decimals)
    for g, e in zip(got, TV3_TABLE[step], strict=True):
        close_printed(g, e, 6)


def test_tv3_window_holds_last_five_steps():
    tracker = CapabilityTracker(2, window=5)
    for step, (a, b) in enumerate(zip(TV3_A, TV3_B, strict=True), start=1):
        tracker.update([a, b])
        if step == 6:
            assert [h[0] for h in tracker.history] == TV3_A[1:6]  # steps 2–6
        if step == 7:
            assert [h[0] for h in tracker.history] == TV3_A[2:7]  # steps 3–7
            assert [h[1] for h in tracker.history] == TV3_B[2:7]


# ===================================================================================================
# TV-4: stepwise lower-bound schedule L_u
# ===================================================================================================


def test_tv4_default_schedule():
    got = [stepwise_lower_bound(u) for u in range(10)]
    close(got, [0.8, 0.825, 0.85, 0.875, 0.9, 0.925, 0.95, 0.975, 1.0, 1.0])
    assert got[8] == 1.0 and got[9] == 1.0  # capped at exactly 1


def test_tv4_4b_4b_instruct_schedule():
    close([stepwise_lower_bound(u, 0.2, 0.01) for u in range(4)], [0.8, 0.81, 0.82, 0.83])


def test_tv4_llama1b_llama3b_schedule():
    """Table 5's "δ" column 0.9 is the lower bound itself, i.e. δ = 0.1."""
    close([stepwise_lower_bound(u, 0.1, 0.01) for u in range(4)], [0.9, 0.91, 0.92, 0.93])


@pytest.mark.parametrize(
    ("u", "c", "has_grad"), [(0, 0.83, True), (1, 0.83, True), (2, 0.85, False), (3, 0.875, False)]
)
def test_tv4_cross_sample_s083(u, c, has_grad):
    m = t([math.log(0.83)], requires_grad=True)
    s = sequence_log_ratio(m, t([0.0])).exp()
    close(s, [0.83])
    objective = cross_objective(s, t([1.0]), 1.0, 0.0, stepwise_lower_bound(u))
    close(objective, [c])  # α = 0, ρ = 1, A = 1: J = c
    objective.sum().backward()
    if has_grad:
        close(m.grad, [0.83])  # ∂c/∂m = s
    else:
        assert m.grad.item() == 0.0


# ===================================================================================================
# TV-5: GSPO baseline (single agent, G = 4, ε_low = 3e-4, ε_high = 4e-4)
# ===================================================================================================

TV5_REWARDS = [[1.0, 0.0, 1.0, 1.0]]
TV5_OLD = [[-0.5, -1.0, -0.2], [-0.3, -0.4, -0.5, -0.6, -0.7], [-0.1, -0.2], [-0.4, -0.3, -0.2, -0.1]]
TV5_CUR = [[-0.5, -0.9997, -0.2], [-0.3, -0.4, -0.5, -0.6, -0.6975], [-0.1, -0.199], [-0.4, -0.3, -0.2, -0.1016]]
TV5_LENGTHS = [3, 5, 2, 4]
TV5_LOG_S = [0.0001, 0.0005, 0.0005, -0.0004]
TV5_S = [1.0001000050001667, 1.0005001250208359, 1.0005001250208359, 0.9996000799893344]
TV5_ROWS = {
    "verl": dict(
        eps=VERL_ADVANTAGE_EPS,
        adv=[0.499999000002, -1.499997000006, 0.499999000002, 0.499999000002],
        J=[0.5000490024020785, -1.5007471860368815, 0.5001989996020008, 0.4997990403965864],
        loss=1.7503590905396105e-04,
        token_grad=[-0.04167075020017321, 0.07503735930184408, 0.0, -0.03123744002478665],
    ),
    "trl": dict(
        eps=TRL_ADVANTAGE_EPS,
        adv=[0.4999000199960008, -1.4997000599880024, 0.4999000199960008, 0.4999000199960008],
        J=[0.49995001249758386, -1.5004500975117514, 0.5000999800039991, 0.4997000999746723],
        loss=1.7500125887399964e-04,
        token_grad=[-0.04166250104146532, 0.07502250487558756, 0.0, -0.03123125624841702],
    ),
}


def _padded(rows, requires_grad=False):
    values = torch.zeros(len(rows), 5, dtype=torch.float64)
    mask = torch.zeros(len(rows), 5, dtype=torch.bool)
    for i, row in enumerate(rows):
        values[i, : len(row)] = t(row)
        mask[i, : len(row)] = True
    return values.requires_grad_(requires_grad), mask


def _expected_token_grad(per_sequence):
    grad = torch.zeros(4, 5, dtype=torch.float64)
    for i, (g, n) in enumerate(zip(per_sequence, TV5_LENGTHS, strict=True)):
        grad[i, :n] = g
    return grad


def test_tv5_mean_log_ratio_and_ratio():
    cur, mask = _padded(TV5_CUR)
    old, _ = _padded(TV5_OLD)
    log_s = sequence_log_ratio(masked_mean(cur, mask), masked_mean(old, mask))
    close(log_s, TV5_LOG_S)
    close(log_s.exp(), TV5_S)


def test_tv5_clip_states():
    """Only sample 1 is inside [0.9997, 1.0004]. Sample 3 is clipped (A > 0, s > 1.0004: no gradient); samples 2
    (A < 0, s > 1.0004) and 4 (A > 0, s < 0.9997) take the unclipped branch of the min (gradient flows)."""
    s = t(TV5_S)
    assert inside_window(s, 1 - 3e-4, 1 + 4e-4).tolist() == [True, False, False, False]
    adv = t(TV5_ROWS["verl"]["adv"])
    s.requires_grad_(True)
    gspo_objective(s, adv).sum().backward()
    assert [g != 0 for g in s.grad.tolist()] == [True, True, False, True]


@pytest.mark.parametrize("convention", ["verl", "trl"])
def test_tv5_gspo(convention):
    row = TV5_ROWS[convention]
    adv = group_relative_advantages(t(TV5_REWARDS), eps=row["eps"])[0]
    close(adv, row["adv"])
    cur, mask = _padded(TV5_CUR, requires_grad=True)
    old, _ = _padded(TV5_OLD)
    s = sequence_log_ratio(masked_mean(cur, mask), masked_mean(old, mask)).exp()
    objective = gspo_objective(s, adv)
    close(objective, row["J"])
    loss, objective_2 = sequence_policy_loss(s, adv, torch.ones(4, dtype=torch.bool))
    close(objective_2, row["J"])
    close(loss, row["loss"])
    loss.backward()
    close(cur.grad, _expected_token_grad(row["token_grad"]))


def test_tv5_verl_per_token_stop_gradient_form():
    """verl's gspo loss: per-token ratio exp(ℓ_t − sg ℓ_t + sg[log s]), seq-mean-token-mean aggregation."""
    adv = group_relative_advantages(t(TV5_REWARDS))[0]
    cur, mask = _padded(TV5_CUR, requires_grad=True)
    old, _ = _padded(TV5_OLD)
    log_s = sequence_log_ratio(masked_mean(cur, mask), masked_mean(old, mask))
    ratio = torch.exp(cur - cur.detach() + log_s.detach().unsqueeze(-1))
    per_token = ppo_clip_objective(ratio, adv.unsqueeze(-1).expand_as(ratio), 3e-4, 4e-4)
    loss = -seq_mean_token_mean(per_token, mask)
    close(loss, 1.7503590905396105e-04)
    loss.backward()
    close(cur.grad, _expected_token_grad(TV5_ROWS["verl"]["token_grad"]))


# ===================================================================================================
# TV-6: KL term (k3, self samples only, β = 0.001)
# ===================================================================================================


def test_tv6_k3_kl_value():
    kl = k3_kl(t([-0.50]), t([-0.55]))
    close(kl, [math.exp(-0.05) + 0.05 - 1.0])
    close_printed(kl, [0.0012294245], 10)


def test_tv6_kl_contribution_token_mean_and_seq_mean_token_mean():
    """0.001 × token-mean (C0) or seq-mean-token-mean (C1); equal for a single sequence."""
    logp = t([[-0.50, -0.50]])
    ref = t([[-0.55, -0.55]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    kl = k3_kl(logp, ref)
    expected = 0.001 * (math.exp(-0.05) + 0.05 - 1.0)
    close(0.001 * token_mean(kl, mask), expected)
    close(0.001 * seq_mean_token_mean(kl, mask), expected)


# ===================================================================================================
# §9.9: a sample exactly on a clip bound counts as inside, so its gradient flows
# ===================================================================================================

SELF_LOW, SELF_HIGH = 1.0 - 3e-4, 1.0 + 4e-4


@pytest.mark.parametrize("u", [0, 2, 3])
@pytest.mark.parametrize("alpha", [0.0, 1.0, 3.0])
@pytest.mark.parametrize("adv", [0.9660899164162359, -0.9660899164162359])
def test_bound_cross_at_lower_bound_has_gradient(u, alpha, adv):
    lower = stepwise_lower_bound(u)
    s = t([lower], requires_grad=True)
    loss, objective = sequence_policy_loss(s, t([adv]), torch.tensor([False]), 1.5, alpha, lower)
    close(objective, [lower ** (alpha + 1) * 1.5 * adv])
    loss.backward()
    close(s.grad, [-(lower**alpha) * 1.5 * adv])  # ∂(−J)/∂s = −sg[c]^α·ρ·A


@pytest.mark.parametrize("alpha", [0.0, 1.0, 3.0])
@pytest.mark.parametrize("adv", [0.5, -0.5])
def test_bound_cross_at_upper_bound_1_has_gradient(alpha, adv):
    s = t([1.0], requires_grad=True)
    loss, objective = sequence_policy_loss(s, t([adv]), torch.tensor([False]), 1.5, alpha, stepwise_lower_bound(2))
    close(objective, [1.5 * adv])
    loss.backward()
    close(s.grad, [-1.5 * adv])


@pytest.mark.parametrize("bound", [SELF_LOW, SELF_HIGH], ids=["one_minus_eps_low", "one_plus_eps_high"])
@pytest.mark.parametrize("adv", [0.5, -0.5])
def test_bound_self_on_bound_has_gradient(bound, adv):
    s = t([bound], requires_grad=True)
    loss, objective = sequence_policy_loss(s, t([adv]), torch.tensor([True]))
    close(objective, [bound * adv])
    loss.backward()
    close(s.grad, [-adv])


@pytest.mark.parametrize(
    ("bound", "toward", "adv"),
    [(SELF_LOW, 0.0, -0.5), (SELF_HIGH, 2.0, 0.5)],
    ids=["below_low_adv_neg", "above_high_adv_pos"],
)
def test_bound_self_just_outside_is_clipped(bound, toward, adv):
    s = torch.nextafter(t([bound]), t([toward])).requires_grad_(True)
    loss, _ = sequence_policy_loss(s, t([adv]), torch.tensor([True]))
    loss.backward()
    assert s.grad.item() == 0.0


@pytest.mark.parametrize(("bound", "toward"), [(0.85, 0.0), (1.0, 2.0)], ids=["below_L2", "above_1"])
def test_bound_cross_just_outside_is_clipped(bound, toward):
    lower = stepwise_lower_bound(2)
    bound = lower if bound == 0.85 else bound
    s = torch.nextafter(t([bound]), t([toward])).requires_grad_(True)
    loss, _ = sequence_policy_loss(s, t([0.7]), torch.tensor([False]), 1.5, 1.0, lower)
    loss.backward()
    assert s.grad.item() == 0.0


@pytest.mark.parametrize("tensor_bounds", [False, True], ids=["scalar_bounds", "tensor_bounds"])
def test_bound_clip_inclusive_gradient_is_one_on_both_bounds(tensor_bounds):
    """The library's own clip: gradient 1 on [low, high] inclusive, 0 outside, scalar or tensor bounds."""
    low, high = 0.8, 1.0
    x = t([0.8, 1.0, 0.9, torch.nextafter(t(0.8), t(0.0)).item(), torch.nextafter(t(1.0), t(2.0)).item()])
    x.requires_grad_(True)
    lo, hi = (t(low), t(high)) if tensor_bounds else (low, high)
    clip_inclusive(x, lo, hi).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert inside_window(x.detach(), lo, hi).tolist() == [True, True, True, False, False]
