"""Capability estimates P̂ and the capability ratio ω (hacpo-spec §2.2, paper eqs. 8–9; TV-3).

Direction matters (spec §7.1). For learner k and source j:
  * loss weight      ρ(j→k) = clip(P̂_j / P̂_k, 0.1, 10)   multiplies j's samples in k's loss (eq. 10);
  * baseline weight  w_{k←j} = 1 / ρ(j→k)                  weights j's rewards in k's baseline (eq. 7).
Both are 1 for j = k. Success rates are kept in float64 (spec §9.10).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import torch

from hacrl_exp.algo._checks import check_nonnegative, check_positive_int, check_range

CAPABILITY_FLOOR = 1e-8
RATIO_CLIP = (0.1, 10.0)


def capability_ratios(p_hat: torch.Tensor, clip: tuple[float, float] = RATIO_CLIP) -> torch.Tensor:
    """Matrix of loss weights ρ[k, j] = ρ(j→k) = clip(P̂_j / P̂_k, lo, hi) (spec §2.2; TV-3).

    p_hat (..., N) capability estimates, already floored > 0. Returns (..., N, N) with ρ[k, k] = 1.
    A leading dim allows one estimate per category (the per-category capability scope).
    """
    lo, hi = clip
    if not 0 < lo <= 1 <= hi:
        raise ValueError(f"clip={clip!r} must satisfy 0 < low <= 1 <= high")
    if bool((p_hat <= 0).any()):
        raise ValueError("p_hat must be > 0; floor it first (CapabilityTracker does)")
    ratio = p_hat.unsqueeze(-2) / p_hat.unsqueeze(-1)  # [..., k, j] = P̂_j / P̂_k
    return ratio.clamp(lo, hi)


def baseline_weights(loss_weight: torch.Tensor) -> torch.Tensor:
    """Baseline weights w[k, j] = w_{k←j} = 1 / ρ(j→k) (spec §2.1 step 1). Input and output (..., N, N)."""
    return 1.0 / loss_weight


class CapabilityTracker:
    """Moving-window capability P̂ of N agents (spec §2.2; TV-3).

    P̂^(j)_t = max(floor, (1/|W|) Σ_{τ∈W} a^(j)_τ), W = the last K per-step accuracies *including*
    the current one (so |W| = min(t, K)). Call `update` once per step, before any advantage.

    floor_entries: also floor each window entry, as the verl-v1 port (C1) does; the default floors
    only the mean (spec §2.2). warmup_steps: for the first that many updates every ratio is 1.
    """

    def __init__(
        self,
        n_agents: int,
        window: int = 5,
        floor: float = CAPABILITY_FLOOR,
        clip: tuple[float, float] = RATIO_CLIP,
        warmup_steps: int = 0,
        floor_entries: bool = False,
    ) -> None:
        check_positive_int("n_agents", n_agents)
        check_positive_int("window", window)
        check_range("floor", floor, 0.0, 1.0)
        if floor <= 0:
            raise ValueError(f"floor={floor!r} must be > 0 so that no capability ratio divides by zero")
        check_nonnegative("warmup_steps", warmup_steps)
        capability_ratios(torch.ones(1, dtype=torch.float64), clip)  # validates clip
        self.n_agents, self.window, self.floor = n_agents, window, floor
        self.clip, self.warmup_steps, self.floor_entries = tuple(clip), int(warmup_steps), floor_entries
        self.history: deque[list[float]] = deque(maxlen=window)
        self.steps = 0

    def update(self, accuracy: Sequence[float] | torch.Tensor) -> None:
        """Push this step's accuracy a^(j)_t ∈ [0, 1] of each agent (fraction of responses with R > 0)."""
        values = [float(a) for a in (accuracy.tolist() if torch.is_tensor(accuracy) else accuracy)]
        if len(values) != self.n_agents:
            raise ValueError(f"accuracy has {len(values)} entries; expected one per agent ({self.n_agents})")
        for j, a in enumerate(values):
            check_range(f"accuracy[{j}]", a, 0.0, 1.0)
        if self.floor_entries:
            values = [max(a, self.floor) for a in values]
        self.history.append(values)
        self.steps += 1

    def p_hat(self) -> torch.Tensor:
        """P̂ (N,) float64: the floored window mean. Before any update every agent is 1 (ratio 1)."""
        if not self.history:
            return torch.ones(self.n_agents, dtype=torch.float64)
        mean = torch.tensor(list(self.history), dtype=torch.float64).mean(dim=0)
        return mean.clamp_min(self.floor)

    def loss_weights(self) -> torch.Tensor:
        """ρ[k, j] = clip(P̂_j / P̂_k) (N, N) float64; all ones during warm-up."""
        if self.steps <= self.warmup_steps:
            return torch.ones(self.n_agents, self.n_agents, dtype=torch.float64)
        return capability_ratios(self.p_hat(), self.clip)

    def baseline_weights(self) -> torch.Tensor:
        """w[k, j] = 1 / ρ[k, j] (N, N) float64; row k is learner k's `baseline_weight` argument."""
        return baseline_weights(self.loss_weights())

    def state_dict(self) -> dict[str, Any]:
        """Plain-Python state for checkpoints (JSON-serialisable)."""
        return {"history": [list(h) for h in self.history], "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        history = [list(map(float, h)) for h in state["history"]]
        if any(len(h) != self.n_agents for h in history) or len(history) > self.window:
            raise ValueError("capability state does not match this tracker's n_agents/window")
        self.history = deque(history, maxlen=self.window)
        self.steps = int(state["steps"])
