"""Property tests of hacrl_exp.algo (hacpo-spec §2, §2.5, §3.1): gradients, reductions, invariances, switches."""

from __future__ import annotations

import json
import math

import pytest
import torch
from algo_helpers import TV1_M_CUR, TV1_M_OLD, close, t
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hacrl_exp.algo import (
    ALGORITHMS,
    CapabilityTracker,
    capability_aware_advantages,
    capability_aware_baseline,
    cross_objective,
    get_algorithm,
    group_relative_advantages,
    grpo_objective,
    gspo_objective,
    gspo_objective_loss,
    hacpo_objective,
    minibatch_schedule,
    resolve_mechanisms,
    sequence_log_ratio,
    sequence_policy_loss,
    stepwise_lower_bound,
)
from hacrl_exp.config.schema import MechanismsConfig

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

unit = st.floats(0.0, 1.0, allow_nan=False)
rho_values = st.floats(0.1, 10.0, allow_nan=False)
adv_values = st.floats(-3.0, 3.0, allow_nan=False)
alphas = st.floats(0.0, 4.0, allow_nan=False)


@st.composite
def joint_groups(draw, max_agents=4, max_g=4, max_prompts=3):
    """Binary rewards (P, N·G), source ids (N·G,), a learner and baseline weights (N,) in [0.1, 10]."""
    n = draw(st.integers(1, max_agents))
    g = draw(st.integers(2, max_g)) if n == 1 else draw(st.integers(1, max_g))
    p = draw(st.integers(1, max_prompts))
    bits = draw(st.lists(st.integers(0, 1), min_size=p * n * g, max_size=p * n * g))
    rewards = torch.tensor(bits, dtype=torch.float64).reshape(p, n * g)
    source = torch.arange(n).repeat_interleave(g)
    learner = draw(st.integers(0, n - 1))
    weights = torch.tensor(draw(st.lists(rho_values, min_size=n, max_size=n)), dtype=torch.float64)
    weights[learner] = 1.0
    return rewards, source, learner, weights


@st.composite
def accuracy_histories(draw, n_agents=None, max_steps=9):
    n = n_agents if n_agents is not None else draw(st.integers(1, 4))
    steps = draw(st.integers(1, max_steps))
    values = st.one_of(unit, st.sampled_from([0.0, 1.0, 1e-9]))
    return [draw(st.lists(values, min_size=n, max_size=n)) for _ in range(steps)]


# ---------------------------------------------------------------------------------------------------
# Cross-sample gradient (spec §2.3, §2.5; P Prop. D.6)
# ---------------------------------------------------------------------------------------------------


@PROPERTY
@given(
    samples=st.lists(
        st.tuples(st.floats(-0.4, 0.15), adv_values, rho_values, st.floats(-2.0, 0.0)), min_size=1, max_size=6
    ),
    alpha=alphas,
    u=st.integers(0, 9),
)
def test_cross_gradient_zero_outside_window_formula_inside(samples, alpha, u):
    """∂(mean J)/∂m = s^(α+1)·ρ·A/B inside [L_u, 1] (bounds included) and exactly 0 outside."""
    log_s, adv, rho, m_old = (t(list(c)) for c in zip(*samples, strict=True))
    m = (m_old + log_s).detach().requires_grad_(True)
    s = sequence_log_ratio(m, m_old).exp()
    lower = stepwise_lower_bound(u)
    loss, objective = sequence_policy_loss(s, adv, torch.zeros(len(samples), dtype=torch.bool), rho, alpha, lower)
    loss.backward()
    sd = s.detach()
    inside = (sd >= lower) & (sd <= 1.0)
    c = sd.clamp(lower, 1.0)
    close(objective, c * c**alpha * rho * adv)
    expected = torch.where(inside, sd ** (alpha + 1) * rho * adv / len(samples), torch.zeros_like(sd))
    close(-m.grad, expected)
    assert bool((m.grad[~inside] == 0).all())


@PROPERTY
@given(
    s_value=st.one_of(st.floats(0.5, 1.2), st.sampled_from(["lower", "one"])),
    adv=adv_values,
    rho=rho_values,
    alpha=alphas,
    u=st.integers(0, 9),
)
def test_cross_gradient_wrt_s_with_bounds_inside(s_value, adv, rho, alpha, u):
    """∂J/∂s = sg[c]^α·ρ·A on [L_u, 1] including both bounds (spec §9.9), else 0."""
    lower = stepwise_lower_bound(u)
    value = {"lower": lower, "one": 1.0}.get(s_value, s_value)
    s = t([value], requires_grad=True)
    cross_objective(s, t([adv]), rho, alpha, lower).sum().backward()
    expected = value**alpha * rho * adv if lower <= value <= 1.0 else 0.0
    close(s.grad, [expected])


# ---------------------------------------------------------------------------------------------------
# One agent, ω = 1, α = 0: HACPO reduces to GSPO (spec §3.1)
# ---------------------------------------------------------------------------------------------------


@PROPERTY
@given(
    bits=st.lists(st.lists(st.integers(0, 1), min_size=2, max_size=8), min_size=1, max_size=4).filter(
        lambda rows: len({len(r) for r in rows}) == 1
    ),
    eps=st.sampled_from([1e-6, 1e-4]),
)
def test_single_agent_advantages_equal_group_relative(bits, eps):
    rewards = torch.tensor(bits, dtype=torch.float64)
    source = torch.zeros(rewards.shape[1], dtype=torch.long)
    tracker = CapabilityTracker(1)
    tracker.update([float(rewards.mean())])
    weights = tracker.baseline_weights()[0]
    close(weights, [1.0])
    got = capability_aware_advantages(rewards, source, 0, weights, eps)
    close(got, group_relative_advantages(rewards, eps))


@PROPERTY
@given(
    samples=st.lists(st.tuples(st.floats(-0.01, 0.01), adv_values), min_size=1, max_size=8),
    u=st.integers(0, 5),
)
def test_single_agent_loss_equals_mean_gspo(samples, u):
    """All samples are self: ℒ = −mean gspo_objective, whatever ρ/α/L_u say (their self values are ignored)."""
    log_s, adv = (t(list(c)) for c in zip(*samples, strict=True))
    m1 = log_s.clone().requires_grad_(True)
    m2 = log_s.clone().requires_grad_(True)
    n = len(samples)
    loss, objective = sequence_policy_loss(
        m1.exp(),
        adv,
        torch.ones(n, dtype=torch.bool),
        1.0,  # ω = 1
        alpha=0.0,
        lower_bound=stepwise_lower_bound(u),
    )
    reference = gspo_objective(m2.exp(), adv)
    close(objective, reference)
    close(loss, -reference.mean())
    loss.backward()
    (-reference.mean()).backward()
    close(m1.grad, m2.grad)


# ---------------------------------------------------------------------------------------------------
# Invariance to the order in which agents are listed
# ---------------------------------------------------------------------------------------------------


@PROPERTY
@given(data=st.data())
def test_agent_relabelling_permutes_capabilities_and_keeps_advantages(data):
    n = data.draw(st.integers(2, 4))
    history = data.draw(accuracy_histories(n_agents=n, max_steps=7))
    perm = data.draw(st.permutations(range(n)))  # agent j gets the new id perm[j]
    perm_t = torch.tensor(perm)
    g = data.draw(st.integers(1, 3))
    bits = data.draw(st.lists(st.integers(0, 1), min_size=2 * n * g, max_size=2 * n * g))
    rewards = torch.tensor(bits, dtype=torch.float64).reshape(2, n * g)
    source = torch.arange(n).repeat_interleave(g)
    learner = data.draw(st.integers(0, n - 1))

    tracker, relabelled = CapabilityTracker(n), CapabilityTracker(n)
    for acc in history:
        tracker.update(acc)
        new = [0.0] * n
        for j, a in enumerate(acc):
            new[perm[j]] = a
        relabelled.update(new)
    rho, rho_new = tracker.loss_weights(), relabelled.loss_weights()
    close(rho_new[perm_t][:, perm_t], rho)  # ρ'[π k, π j] = ρ[k, j]
    close(relabelled.baseline_weights()[perm_t][:, perm_t], tracker.baseline_weights())

    adv = capability_aware_advantages(rewards, source, learner, tracker.baseline_weights()[learner])
    adv_new = capability_aware_advantages(
        rewards, perm_t[source], perm[learner], relabelled.baseline_weights()[perm[learner]]
    )
    close(adv_new, adv)


@PROPERTY
@given(group=joint_groups(), data=st.data())
def test_column_order_permutes_advantages(group, data):
    rewards, source, learner, weights = group
    cols = torch.tensor(data.draw(st.permutations(range(rewards.shape[1]))))
    adv = capability_aware_advantages(rewards, source, learner, weights)
    adv_perm = capability_aware_advantages(rewards[:, cols], source[cols], learner, weights)
    close(adv_perm, adv[:, cols])


# ---------------------------------------------------------------------------------------------------
# Uniform groups (spec §2.1 step 2, TV-2.1)
# ---------------------------------------------------------------------------------------------------


@PROPERTY
@given(
    n=st.integers(1, 4),
    g=st.integers(2, 5),
    p=st.integers(1, 3),
    value=st.sampled_from([0.0, 1.0]),
    data=st.data(),
)
def test_uniform_rewards_give_zero_advantages_for_any_weights(n, g, p, value, data):
    learner = data.draw(st.integers(0, n - 1))
    per_prompt = data.draw(st.booleans())
    shape = (p, n) if per_prompt else (n,)
    flat = data.draw(st.lists(st.floats(0.1, 15.0), min_size=math.prod(shape), max_size=math.prod(shape)))
    weights = torch.tensor(flat, dtype=torch.float64).reshape(shape)
    rewards = torch.full((p, n * g), value, dtype=torch.float64)
    source = torch.arange(n).repeat_interleave(g)
    adv = capability_aware_advantages(rewards, source, learner, weights)
    assert torch.equal(adv, torch.zeros_like(rewards))


@PROPERTY
@given(group=joint_groups())
def test_guarded_baseline_never_exceeds_one(group):
    """With binary rewards the code rules keep μ̂ in [0, 1] (spec §2.1 steps 2 and 4)."""
    rewards, source, learner, weights = group
    mu = capability_aware_baseline(rewards, source, learner, weights)
    assert bool(((mu >= 0) & (mu <= 1)).all())


# ---------------------------------------------------------------------------------------------------
# Capability tracker (spec §2.2, TV-3)
# ---------------------------------------------------------------------------------------------------


@PROPERTY
@given(history=accuracy_histories(), window=st.integers(1, 7), floor_entries=st.booleans())
def test_tracker_ratios_finite_clipped_and_reciprocal(history, window, floor_entries):
    n = len(history[0])
    tracker = CapabilityTracker(n, window=window, floor_entries=floor_entries)
    for acc in history:
        tracker.update(acc)
        p = tracker.p_hat()
        rho, w = tracker.loss_weights(), tracker.baseline_weights()
        assert p.dtype == torch.float64 and rho.dtype == torch.float64
        assert bool(torch.isfinite(rho).all()) and bool(torch.isfinite(w).all())
        assert bool(((rho >= 0.1) & (rho <= 10.0)).all())
        assert bool(((w >= 0.1 - 1e-12) & (w <= 10.0 + 1e-12)).all())
        assert torch.equal(torch.diagonal(rho), torch.ones(n, dtype=torch.float64))
        raw = p.unsqueeze(0) / p.unsqueeze(1)
        unclipped = (raw > 0.1) & (raw < 10.0)
        product = rho * rho.T
        close(product[unclipped], torch.ones(int(unclipped.sum()), dtype=torch.float64))
        close(w * rho, torch.ones(n, n, dtype=torch.float64))
        # the window mean, floored
        recent = torch.tensor(list(tracker.history), dtype=torch.float64)
        close(p, recent.mean(0).clamp_min(1e-8))


@PROPERTY
@given(history=accuracy_histories(), window=st.integers(1, 6), data=st.data())
def test_tracker_state_dict_round_trip(history, window, data):
    """Checkpoint → JSON → a fresh tracker: same P̂, ρ, w now and after further updates."""
    n = len(history[0])
    more = data.draw(accuracy_histories(n_agents=n, max_steps=4))
    tracker = CapabilityTracker(n, window=window)
    for acc in history:
        tracker.update(acc)
    restored = CapabilityTracker(n, window=window)
    restored.load_state_dict(json.loads(json.dumps(tracker.state_dict())))
    for _ in range(len(more) + 1):
        assert torch.equal(restored.p_hat(), tracker.p_hat())
        assert torch.equal(restored.loss_weights(), tracker.loss_weights())
        assert torch.equal(restored.baseline_weights(), tracker.baseline_weights())
        assert restored.steps == tracker.steps
        if more:
            acc = more.pop()
            tracker.update(acc)
            restored.update(acc)


@FEW
@given(history=accuracy_histories(n_agents=2), warmup=st.integers(0, 4))
def test_tracker_warmup_gives_unit_ratios(history, warmup):
    tracker = CapabilityTracker(2, warmup_steps=warmup)
    assert torch.equal(tracker.loss_weights(), torch.ones(2, 2, dtype=torch.float64))
    for step, acc in enumerate(history, start=1):
        tracker.update(acc)
        if step <= warmup:
            assert torch.equal(tracker.loss_weights(), torch.ones(2, 2, dtype=torch.float64))
            assert torch.equal(tracker.baseline_weights(), torch.ones(2, 2, dtype=torch.float64))
        else:
            p = tracker.p_hat().tolist()
            close(tracker.loss_weights(), [[min(10.0, max(0.1, p[j] / p[k])) for j in range(2)] for k in range(2)])


# ---------------------------------------------------------------------------------------------------
# Mini-batch schedule and stepwise bound (spec §1.6, §2.4)
# ---------------------------------------------------------------------------------------------------


@PROPERTY
@given(blocks=st.lists(st.integers(0, 40), min_size=1, max_size=5), size=st.integers(1, 16))
def test_minibatch_schedule_covers_every_row_once_u_increasing(blocks, size):
    schedule = minibatch_schedule(blocks, size)
    rows = [r for mb in schedule for r in range(mb.start, mb.stop)]
    assert rows == list(range(sum(blocks)))
    assert [mb.u for mb in schedule] == list(range(len(schedule)))
    assert all(0 < mb.stop - mb.start <= size for mb in schedule)


@PROPERTY
@given(multiples=st.lists(st.integers(0, 4), min_size=1, max_size=5), size=st.integers(1, 8))
def test_minibatch_schedule_restart_per_source(multiples, size):
    blocks = [k * size for k in multiples]
    schedule = minibatch_schedule(blocks, size, restart_per_source=True)
    rows = [r for mb in schedule for r in range(mb.start, mb.stop)]
    assert rows == list(range(sum(blocks)))
    expected_u = [u for k in multiples for u in range(k)]
    assert [mb.u for mb in schedule] == expected_u


@PROPERTY
@given(delta=st.floats(0.0, 0.99), delta_step=st.floats(0.0, 0.2), u=st.integers(0, 50))
def test_stepwise_lower_bound_monotone_and_capped(delta, delta_step, u):
    lower, nxt = stepwise_lower_bound(u, delta, delta_step), stepwise_lower_bound(u + 1, delta, delta_step)
    assert lower <= nxt <= 1.0
    close(lower, min(1.0, 1.0 - delta + u * delta_step))


# ---------------------------------------------------------------------------------------------------
# Mechanism switches: each "off" is the ablation of spec §2
# ---------------------------------------------------------------------------------------------------


def resolved(algorithm: str = "hacpo", alpha: float = 1.0, delta_step: float = 0.025, **switches):
    """The plain step parameters of `mechanisms.*` = switches (all on by default) for one edge of α, from agent 1."""
    return resolve_mechanisms(MechanismsConfig(**switches), get_algorithm(algorithm), {1: alpha}, delta_step)


def test_mechanisms_all_on_pass_values_through():
    mech = resolved(alpha=3.0)
    w = t([1.0, 0.25, 4.0])
    assert mech.baseline_weight(w) is w and mech.loss_weight(w) is w
    assert mech.alpha_from == {1: 3.0} and mech.delta_step == 0.025 and mech.clip_cross


@pytest.mark.parametrize("algorithm", ["naive", "gspo", "gspo_x2", "grpo"])
def test_only_hacpo_weights_its_baseline(algorithm):
    """The double gate of old, in one place: Naive and the baselines never weight the joint baseline."""
    w = t([1.0, 0.25])
    assert not resolved(algorithm).weighted_baseline and torch.equal(resolved(algorithm).baseline_weight(w), t([1, 1]))


def test_naive_cross_rows_carry_no_weight():
    """Naive's objective is GSPO's on every row (§2.6): it resolves to loss weight 1 and α = 0, so the logged
    effective weight ρ · clip(s, L_u, 1)^α of its cross rows is the 1 it applies, not HACPO's would-be weight."""
    mech = resolved("naive", alpha=3.0)
    assert torch.equal(mech.loss_weight(t([1.5, 0.25])), t([1, 1])) and mech.alpha_from == {1: 0.0}
    hacpo = resolved("hacpo", alpha=3.0)
    assert torch.equal(hacpo.loss_weight(t([1.5, 0.25])), t([1.5, 0.25])) and hacpo.alpha_from == {1: 3.0}


def test_mechanisms_omega_off_gives_tv1_case_d(tv1_adv_a, tv1_loss_weight, tv1_is_self):
    """The "HACPO − ω" ablation: cross loss weight 1 while the baseline weights stay (TV-1 D)."""
    mech = resolved(omega=False)
    m = t(TV1_M_CUR)
    s = sequence_log_ratio(m, t(TV1_M_OLD)).exp()
    _, objective = sequence_policy_loss(
        s, tv1_adv_a, tv1_is_self, mech.loss_weight(tv1_loss_weight), mech.alpha_from[1], stepwise_lower_bound(2)
    )
    close(objective[4:], [0.7156970128980255, 0.6979999646107303, -0.9660899164162359, 0.9098292195341822])
    w = t([1.0, 2.0 / 3.0])
    assert mech.baseline_weight(w) is w


@FEW
@given(delta=st.floats(0.0, 0.5), delta_step=st.floats(0.0, 0.2))
def test_mechanisms_stepwise_off_gives_constant_bound(delta, delta_step):
    mech = resolved(delta_step=delta_step, stepwise=False)
    assert mech.delta_step == 0.0
    bounds = {stepwise_lower_bound(u, delta, mech.delta_step) for u in range(12)}
    assert bounds == {1.0 - delta}


@PROPERTY
@given(
    samples=st.lists(st.tuples(st.floats(0.6, 1.1), adv_values, rho_values), min_size=1, max_size=6),
    alpha=alphas,
    u=st.integers(0, 4),
)
def test_mechanisms_exponential_is_off_gives_alpha_zero(samples, alpha, u):
    mech = resolved(alpha=alpha, exponential_is=False)
    assert mech.alpha_from == {1: 0.0}
    s, adv, rho = (t(list(c)) for c in zip(*samples, strict=True))
    lower = stepwise_lower_bound(u)
    got = cross_objective(s, adv, rho, mech.alpha_from[1], lower)
    close(got, s.clamp(lower, 1.0) * rho * adv)


@PROPERTY
@given(group=joint_groups())
def test_mechanisms_capability_advantage_off_gives_naive_joint_advantage(group):
    """The "HACPO − Adv" ablation: the unweighted mean of all nG rewards and the same σ, i.e. the plain
    group-relative advantage over the joint group."""
    rewards, source, learner, weights = group
    mech = resolved(capability_advantage=False)
    got = capability_aware_advantages(rewards, source, learner, mech.baseline_weight(weights))
    close(got, group_relative_advantages(rewards))


@PROPERTY
@given(
    samples=st.lists(st.tuples(st.floats(-0.5, 0.3), adv_values, rho_values), min_size=1, max_size=6),
    alpha=alphas,
    u=st.integers(0, 4),
)
def test_mechanisms_clip_off_gives_raw_ratio_objective(samples, alpha, u):
    """The "no Clip" ablation: J = s·sg[s]^α·ρ·A with the raw s, so every cross sample gets s^(α+1)·ρ·A/B."""
    mech = resolved(clip=False)
    log_s, adv, rho = (t(list(c)) for c in zip(*samples, strict=True))
    m = log_s.clone().requires_grad_(True)
    s = sequence_log_ratio(m, torch.zeros_like(log_s)).exp()
    n = len(samples)
    loss, objective = sequence_policy_loss(
        s, adv, torch.zeros(n, dtype=torch.bool), rho, alpha, stepwise_lower_bound(u), clip=mech.clip_cross
    )
    sd = s.detach()
    close(objective, sd * sd**alpha * rho * adv)
    loss.backward()
    close(-m.grad, sd ** (alpha + 1) * rho * adv / n)


# ---------------------------------------------------------------------------------------------------
# Algorithm registry (spec §2.6, §3)
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shares", "capability", "objective", "token_level", "multiplier", "passes"),
    [
        ("hacpo", True, True, hacpo_objective, False, 1, 1),
        ("naive", True, False, gspo_objective_loss, False, 1, 1),
        ("gspo", False, False, gspo_objective_loss, False, 1, 1),
        ("gspo_x2", False, False, gspo_objective_loss, False, 2, 1),
        ("gspo_update_matched", False, False, gspo_objective_loss, False, 1, 2),
        ("grpo", False, False, grpo_objective, True, 1, 1),
    ],
)
def test_algorithm_registry(name, shares, capability, objective, token_level, multiplier, passes):
    algo = get_algorithm(name)
    assert algo is ALGORITHMS[name] and algo.name == name
    assert (algo.shares_rollouts, algo.capability_baseline, algo.objective) == (shares, capability, objective)
    assert (algo.token_level, algo.rollout_multiplier, algo.passes) == (token_level, multiplier, passes)


@PROPERTY
@given(samples=st.lists(st.tuples(st.floats(-0.01, 0.01), adv_values), min_size=1, max_size=6))
def test_naive_cross_samples_use_gspo_clip(samples):
    """Naive (hacpo_cross=False): cross samples get the same GSPO objective as self samples (spec §2.6)."""
    log_s, adv = (t(list(c)) for c in zip(*samples, strict=True))
    n = len(samples)
    _, objective = sequence_policy_loss(
        log_s.exp(), adv, torch.zeros(n, dtype=torch.bool), 1.5, 1.0, 0.85, hacpo_cross=False
    )
    close(objective, gspo_objective(log_s.exp(), adv))
