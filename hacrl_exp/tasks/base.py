"""The task interface: problems with verifiable answers, and their grader.

A task hands out the same prompts to every agent; each agent renders `Problem.prompt` with its own
chat template (or as plain text). Rewards are binary (spec §1.1) and come from the one grader,
`hacrl_exp.rewards.Grader`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hacrl_exp.rewards.grader import Grade

__all__ = ["Grade", "Problem", "Task"]


@dataclass(frozen=True)
class Problem:
    """One problem. `category` (tier, MATH subject, …) drives per-category capability and eval tables."""

    id: str
    prompt: str
    """The user text the agent sees, task suffix included, before any chat template."""
    answer: str
    """Gold final answer, as the grader compares it."""
    category: str = "all"
    solution: str | None = None
    """A worked target response: supervised warm start, and gold-solution grader checks."""
    meta: dict = field(default_factory=dict, compare=False, hash=False)


class Task(Protocol):
    """What the trainer and the evaluation need from a task."""

    name: str

    @property
    def categories(self) -> list[str]:
        """All categories, in a stable order."""
        ...

    def train_problems(self, step: int, n: int) -> list[Problem]:
        """The n prompts of training step `step`: a pure function of (task seed, step), so resume is exact."""
        ...

    def extra_problems(self, step: int, round: int, n: int) -> list[Problem]:
        """n more training prompts (n >= 0) for extra round `round` (from 1) of step `step`, drawn as the steps' are
        (any category), as DAPO's dynamic sampling draws new prompts (algorithm.dynamic_prompts=fresh): a pure
        function of (task seed, step, round, n), never an eval problem, and a stream of its own, so the steps'
        prompts do not move."""
        ...

    def eval_problems(self) -> list[Problem]:
        """The fixed held-out set."""
        ...

    def validation_problems(self, per_category: int) -> list[Problem]:
        """per_category problems of each category that are never scored (none in eval_problems): what the warm-start
        target and any other stopping rule read (task.validation_per_tier)."""
        ...

    def grade(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Grade]:
        """Grade each response against its problem; must never hang or raise on hostile text."""
        ...
