"""Shared helpers and the TV-1 tensors of hacpo-spec §8 (all float64)."""

from __future__ import annotations

import pytest
import torch
from algo_helpers import TV1_ACC_A, TV1_ACC_B, TV1_M_OLD, TV1_REWARDS, TV1_SOURCE, t

from hacrl_exp.algo import CapabilityTracker, capability_aware_advantages


@pytest.fixture(autouse=True, scope="module")
def _float64_default():
    """Every tensor built without an explicit dtype is float64, as in spec §8; restored afterwards."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture
def tv1_tracker() -> CapabilityTracker:
    """Capability tracker fed the 5 TV-1 steps (K = 5, current step included)."""
    tracker = CapabilityTracker(n_agents=2, window=5)
    for a, b in zip(TV1_ACC_A, TV1_ACC_B, strict=True):
        tracker.update([a, b])
    return tracker


@pytest.fixture
def tv1_rewards() -> torch.Tensor:
    return t(TV1_REWARDS)


@pytest.fixture
def tv1_source() -> torch.Tensor:
    return torch.tensor(TV1_SOURCE, dtype=torch.long)


@pytest.fixture
def tv1_is_self(tv1_source) -> torch.Tensor:
    return tv1_source == 0


@pytest.fixture
def tv1_m_old() -> torch.Tensor:
    return t(TV1_M_OLD)


@pytest.fixture
def tv1_adv_a(tv1_tracker, tv1_rewards, tv1_source) -> torch.Tensor:
    """Learner A's capability-aware advantages (8,), built end to end from the tracker."""
    weights = tv1_tracker.baseline_weights()[0]
    return capability_aware_advantages(tv1_rewards, tv1_source, 0, weights)[0]


@pytest.fixture
def tv1_loss_weight(tv1_tracker, tv1_source) -> torch.Tensor:
    """ρ(src→A) per sample: 1 on self rows (ignored), 1.5 on B's rows."""
    return tv1_tracker.loss_weights()[0][tv1_source]
