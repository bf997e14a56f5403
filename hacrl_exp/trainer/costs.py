"""What a learner's training costs, counted where the work runs: the `cost/*` metrics of docs/metrics.md.

Each agent worker owns a `CostMeter`. Its rollout and learn calls add to it; the loop takes the increments once per
step (`CostMeter.take`) and adds them to the job's cumulative totals, which live in the checkpoint's state (like
`train/rollouts_total`), so a resumed run continues them exactly. Token counts are the real (unpadded) lengths:

    generated_rollouts  responses the agent sampled
    generated_tokens    their response tokens, in the agent's tokenizer
    graded_rollouts     responses the agent's task graded
    trained_rows        rows run through forward + backward in updates (after skip-zero-advantage), once per pass
    updates             optimizer steps taken (a step skipped as non-finite is not one)
    forward_tokens      prompt + response tokens through the agent's forward passes of the step: scoring its old
                        log-probs (and reference log-probs with KL), and every update micro-batch
    backward_tokens     prompt + response tokens through backward (the update micro-batches)
    process_seconds     CPU time of the agent's rollout and learn calls, `time.process_time()` in the process that
                        runs them (all its threads; a Ray actor's own process): it does not grow while the process
                        waits for a CPU, as wall-clock does on a loaded machine. Contention still shows in it a little
                        (shared caches; with several torch threads, OpenMP threads spinning while a sibling waits),
                        so compare it at one thread (trainer.threads=1, as the comparison grids run)
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

COST_KEYS = (
    "generated_rollouts",
    "generated_tokens",
    "graded_rollouts",
    "trained_rows",
    "updates",
    "forward_tokens",
    "backward_tokens",
    "process_seconds",
)


def zero_costs() -> dict[str, float]:
    """Every cost counter at 0."""
    return dict.fromkeys(COST_KEYS, 0.0)


def sequence_tokens(prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]]) -> int:
    """Σ over rows of |prompt| + |response|: the tokens one forward (or backward) pass over these rows reads."""
    return sum(len(p) + len(r) for p, r in zip(prompt_ids, response_ids, strict=True))


class CostMeter:
    """One worker's costs since the last `take`."""

    def __init__(self) -> None:
        self.counts = zero_costs()

    def generated(self, response_ids: Sequence[Sequence[int]]) -> None:
        self.counts["generated_rollouts"] += len(response_ids)
        self.counts["generated_tokens"] += sum(len(r) for r in response_ids)

    def graded(self, rows: int) -> None:
        self.counts["graded_rollouts"] += rows

    def scored(self, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], models: int) -> None:
        """`models` forward passes (old policy, reference) over the rows, no backward."""
        self.counts["forward_tokens"] += models * sequence_tokens(prompt_ids, response_ids)

    def trained(self, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]]) -> None:
        """One update micro-batch: forward and backward over its rows."""
        tokens = sequence_tokens(prompt_ids, response_ids)
        self.counts["trained_rows"] += len(response_ids)
        self.counts["forward_tokens"] += tokens
        self.counts["backward_tokens"] += tokens

    def stepped(self) -> None:
        """One optimizer step taken."""
        self.counts["updates"] += 1

    @contextmanager
    def process_time(self) -> Iterator[None]:
        """Add this process's CPU seconds spent inside the block."""
        started = time.process_time()
        try:
            yield
        finally:
            self.counts["process_seconds"] += time.process_time() - started

    def take(self) -> dict[str, float]:
        """The counts since the last take, then zero."""
        out, self.counts = self.counts, zero_costs()
        return out


def combine_ranks(ranks: Sequence[dict[str, float]]) -> dict[str, float]:
    """A sharded agent's costs from its W ranks' (rank order): each count summed over the ranks (the work they divide
    or repeat), but `updates` once (every rank takes the same optimizer step, on its shard); and each rank's own
    under `rank<r>/<key>`."""
    total = {key: ranks[0][key] if key == "updates" else sum(rank[key] for rank in ranks) for key in ranks[0]}
    return total | {f"rank{r}/{key}": value for r, rank in enumerate(ranks) for key, value in rank.items()}


def add_costs(totals: dict[str, float], increments: dict[str, float]) -> None:
    """totals += increments, key by key (a total missing from an older checkpoint starts at 0)."""
    for key, value in increments.items():
        totals[key] = totals.get(key, 0.0) + value
