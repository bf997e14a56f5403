"""Did a set of trials find a best setting, or do its trials not separate beyond their noise? Pure functions.

The α sweeps (hacrl_exp.sweep) and the report's best-α table (hacrl_exp.report.alpha) both ask it of an edge study's
COMPLETE trials, whose values are held-out accuracies of n problems each. The rule:

    order the trials by value (the study's direction; ties keep trial order): best b, runner-up r
    gap   = |v_b − v_r|
    noise = sqrt(v_b(1 − v_b)/n + v_r(1 − v_r)/n)    one binomial standard error of the difference of two
                                                       accuracies over n problems (0 when n is unknown)
    a best exists  iff  there are ≥ 2 trials, gap > TIE and gap > noise

So every trial at 0.000 has no best (gap 0), and neither has a winner within one standard error of its runner-up:
the study did not learn which α is better. For accuracy/mean, the mean over C categories of n_c problems each, n is
C² / Σ 1/n_c (`effective_problems`), which gives the mean's standard error when the accuracies are alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TIE = 1e-12
"""Values closer than this are one value (float noise, not a difference)."""


@dataclass(frozen=True)
class Separation:
    """The verdict on one set of trials (indices into the values given)."""

    best: int | None
    """Index of the winning trial; None when the trials do not separate."""
    top: int | None
    """Index of the top trial (the winner when there is one); None without trials."""
    runner_up: int | None
    trials: int
    """Trials behind the verdict."""
    spread: float
    """max − min of the values (nan without trials)."""
    gap: float
    """|top − runner-up| (nan with fewer than 2 trials)."""
    noise: float
    """One standard error of the gap (0 when the number of problems is unknown)."""

    @property
    def separated(self) -> bool:
        return self.best is not None

    def reason(self) -> str:
        """Why there is no best, in words ('' when there is one)."""
        if self.separated:
            return ""
        if self.trials < 2:
            return f"{self.trials} complete trial{'s' if self.trials != 1 else ''}: nothing to compare"
        if self.gap <= TIE:
            return f"all {self.trials} trials tied" if self.spread <= TIE else "the top two trials tied"
        return f"best − runner-up {self.gap:.4f} within one standard error {self.noise:.4f}"


def separate_best(values: Sequence[float], problems: float | None, maximize: bool = True) -> Separation:
    """The module docstring's rule on `values` (accuracies over `problems` held-out problems each; None: unknown)."""
    finite = [(i, float(v)) for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if not finite:
        return Separation(None, None, None, 0, math.nan, math.nan, 0.0)
    ordered = sorted(finite, key=lambda iv: -iv[1] if maximize else iv[1])  # stable: ties keep trial order
    spread = max(v for _, v in finite) - min(v for _, v in finite)
    if len(ordered) < 2:
        return Separation(None, ordered[0][0], None, 1, spread, math.nan, 0.0)
    (top, v_top), (second, v_second) = ordered[0], ordered[1]
    gap = abs(v_top - v_second)
    noise = binomial_noise(v_top, v_second, problems)
    best = top if gap > TIE and gap > noise else None
    return Separation(best, top, second, len(finite), spread, gap, noise)


def binomial_noise(a: float, b: float, problems: float | None) -> float:
    """sqrt(a(1 − a)/n + b(1 − b)/n); 0 when n is unknown or a value is not an accuracy in [0, 1]."""
    if not problems or not (0.0 <= a <= 1.0 and 0.0 <= b <= 1.0):
        return 0.0
    return math.sqrt((a * (1 - a) + b * (1 - b)) / problems)


def effective_problems(counts: Mapping[str, int], metric: str) -> float | None:
    """The n behind a held-out `metric` of a run with `counts` problems per category: the category's count for
    accuracy/<category>, C² / Σ_c 1/n_c for accuracy/mean; None for any other metric."""
    kind, _, category = metric.partition("/")
    if kind != "accuracy" or not counts:
        return None
    if category == "mean":
        return len(counts) ** 2 / sum(1 / n for n in counts.values())
    return float(counts[category]) if category in counts else None
