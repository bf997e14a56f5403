"""Stepwise clipping schedule (hacpo-spec §2.4, §1.6; TV-4).

u counts the optimizer updates already done for one learner within one step (0-based). A learner's
batch is its self block followed by one block per source in declared order (the C1 convention),
cut into mini-batches in order, so cross samples meet ever tighter lower bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hacrl_exp.algo._checks import check_nonnegative, check_positive_int, check_range

DEFAULT_DELTA = 0.2
DEFAULT_DELTA_STEP = 0.025


def stepwise_lower_bound(u: int, delta: float = DEFAULT_DELTA, delta_step: float = DEFAULT_DELTA_STEP) -> float:
    """L_u = min(1, 1 − δ + u·δ_step) (spec §2.4; TV-4). δ_step = 0 gives the "no Stepwise" ablation.

    Note the paper's Table 5 "δ" column is the lower bound 1 − δ itself (spec §2.4, §9.3).
    """
    if isinstance(u, bool) or not isinstance(u, int) or u < 0:
        raise ValueError(f"u={u!r} must be an integer >= 0 (optimizer updates done this step)")
    check_range("delta", delta, 0.0, 1.0, high_open=True)
    check_nonnegative("delta_step", delta_step)
    return min(1.0, 1.0 - delta + u * delta_step)


@dataclass(frozen=True)
class MiniBatch:
    """One optimizer update: rows [start, stop) of the learner batch, at stepwise index u."""

    start: int
    stop: int
    u: int


def minibatch_schedule(
    block_sizes: Sequence[int], minibatch_size: int, restart_per_source: bool = False, passes: int = 1
) -> list[MiniBatch]:
    """Cut a self-first learner batch into mini-batches and give each its stepwise index u (spec §1.6).

    block_sizes: rows per block, self block first, then each source in declared order.
    Paper convention (default): u = the global index of the mini-batch, 0, 1, 2, …
    restart_per_source (our extension for N > 2): u restarts at 0 at the first mini-batch of every
    cross block, so later sources do not meet an ever tighter bound; each block must then split
    into whole mini-batches.
    passes: the schedule of one pass, repeated; pass p's mini-batches run the same rows with u + p·U, where U is
    one pass's count of u (its largest u + 1), so a later pass is a later update: [0, 1] twice is u 0, 1, 2, 3.
    """
    check_positive_int("minibatch_size", minibatch_size)
    check_positive_int("passes", passes)
    one = _one_pass(block_sizes, minibatch_size, restart_per_source)
    width = max((mb.u for mb in one), default=-1) + 1
    return [MiniBatch(mb.start, mb.stop, mb.u + p * width) for p in range(passes) for mb in one]


def _one_pass(block_sizes: Sequence[int], minibatch_size: int, restart_per_source: bool) -> list[MiniBatch]:
    if not block_sizes or any(isinstance(b, bool) or not isinstance(b, int) or b < 0 for b in block_sizes):
        raise ValueError(f"block_sizes={list(block_sizes)!r} must be a non-empty list of integers >= 0")
    if restart_per_source and any(b % minibatch_size for b in block_sizes):
        raise ValueError(
            f"block_sizes={list(block_sizes)} must each be divisible by minibatch_size={minibatch_size} "
            "when restart_per_source is on"
        )
    total = sum(block_sizes)
    if not restart_per_source:
        starts = range(0, total, minibatch_size)
        return [MiniBatch(s, min(s + minibatch_size, total), u) for u, s in enumerate(starts)]
    schedule, offset = [], 0
    for size in block_sizes:
        # u only bounds cross samples, so the self block's own count is harmless
        for u, s in enumerate(range(offset, offset + size, minibatch_size)):
            schedule.append(MiniBatch(s, s + minibatch_size, u))
        offset += size
    return schedule
