"""Rewards: the one grading path (extraction, answer forms, math-verify in worker processes), used by training,
evaluation, the gold check, the lm-eval export and `python -m hacrl_exp.grade`. Depends on nothing else in hacrl_exp."""

from hacrl_exp.rewards.forms import canonical, compact, normalize_gold
from hacrl_exp.rewards.grader import (
    COMPARES,
    EXTRACTORS,
    FORMS,
    REWARDS,
    Grade,
    Grader,
    resolve_compare,
    resolve_forms,
)

__all__ = [
    "COMPARES",
    "EXTRACTORS",
    "FORMS",
    "REWARDS",
    "Grade",
    "Grader",
    "canonical",
    "compact",
    "normalize_gold",
    "resolve_compare",
    "resolve_forms",
]
