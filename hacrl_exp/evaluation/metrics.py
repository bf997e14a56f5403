"""Evaluation metrics over n graded samples per problem, and seeded bootstrap confidence intervals. Pure functions.

Problem i has n_i samples with rewards r_i1..r_in (0/1), c_i of them correct. Per-problem scores:
    accuracy  = r_i1                                   greedy accuracy when decoding is greedy (= avg@1)
    avg@k     = (1/k) Σ_{j≤k} r_ij                     mean correctness of the first k samples
    pass@k    = 1 − C(n_i − c_i, k) / C(n_i, k)        unbiased estimator (Chen et al. 2021), all n_i ≥ k samples
    best@k    = max_{j≤k} r_ij                         any of the first k is right (the paper's best@30 on AIME)
    maj@k     = majority vote of the first k answers   ties share the credit: 1/|T| if the right answer is among
                                                       the |T| tied top answers, else 0
A benchmark metric is the mean of its per-problem scores; its 95% CI is a percentile bootstrap over problems
(resampled with replacement, B times, from a seeded generator; every metric of a benchmark uses the same resamples).
Metrics are written `pass@8` in benchmark YAMLs and reported as `pass_at_8` (MLflow forbids '@' in names).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

KINDS = ("accuracy", "avg", "pass", "best", "maj")
CORRECT = "\x00correct"
"""Vote key shared by every answer the grader accepted: they all equal the gold answer, hence each other."""

_SPEC = re.compile(r"^(avg|pass|best|maj)(?:@|_at_)(\d+)$")


@dataclass(frozen=True)
class Metric:
    """One metric: `kind` in KINDS and its k (1 for accuracy)."""

    kind: str
    k: int = 1

    @property
    def name(self) -> str:
        """Reported name: 'accuracy' or '<kind>_at_<k>'."""
        return "accuracy" if self.kind == "accuracy" else f"{self.kind}_at_{self.k}"


def parse_metric(text: str) -> Metric:
    """'accuracy', 'pass@8' or 'pass_at_8' -> Metric; anything else raises ValueError naming the forms."""
    if text == "accuracy":
        return Metric("accuracy")
    m = _SPEC.match(str(text))
    if not m or int(m.group(2)) < 1:
        raise ValueError(f"{text!r} is not a metric; use accuracy, avg@k, pass@k, best@k or maj@k with k >= 1")
    return Metric(m.group(1), int(m.group(2)))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 − C(n−c, k)/C(n, k) = 1 − Π_{i=n−c+1..n} (1 − k/i), stable for large n (Chen et al.)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def majority_score(votes: Sequence[str | None]) -> float:
    """Credit of a majority vote: 1/|T| when CORRECT is among the |T| most frequent keys, else 0.

    `votes` holds one key per sample: CORRECT, a normalised wrong answer, or None (no answer: abstains).
    """
    counts = Counter(v for v in votes if v is not None)
    if not counts:
        return 0.0
    top = max(counts.values())
    tied = [key for key, count in counts.items() if count == top]
    return 1.0 / len(tied) if CORRECT in tied else 0.0


def problem_score(metric: Metric, rewards: Sequence[float], votes: Sequence[str | None]) -> float:
    """The per-problem score of `metric` (module docstring) from this problem's sample rewards and vote keys."""
    n = len(rewards)
    if metric.k > n:
        raise ValueError(f"{metric.name} needs at least {metric.k} samples per problem, got {n}")
    first = [float(r) for r in rewards[: metric.k]]
    if metric.kind == "accuracy":
        return first[0]
    if metric.kind == "avg":
        return sum(first) / metric.k
    if metric.kind == "pass":
        return pass_at_k(n, sum(1 for r in rewards if r >= 1.0), metric.k)
    if metric.kind == "best":
        return max(first)
    return majority_score(votes[: metric.k])


def bootstrap_ci(
    scores: np.ndarray, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of the column means of `scores` (P problems, M metrics), resampling problems.

    Returns (low, high), each (M,). The same resampled index sets serve every column, so the result is a pure
    function of (scores, n_boot, seed, level). One problem (or n_boot 0) gives the point estimate on both sides.
    """
    scores = np.asarray(scores, dtype=np.float64)
    scores = scores[:, None] if scores.ndim == 1 else scores
    mean = scores.mean(axis=0)
    if len(scores) < 2 or n_boot < 1:
        return mean.copy(), mean.copy()
    rng = np.random.default_rng(seed)
    means = np.empty((n_boot, scores.shape[1]))
    chunk = max(1, 2_000_000 // (len(scores) * scores.shape[1]))  # bounds memory at ~16 MB per chunk
    for start in range(0, n_boot, chunk):
        stop = min(start + chunk, n_boot)
        idx = rng.integers(0, len(scores), size=(stop - start, len(scores)))
        means[start:stop] = scores[idx].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    return np.quantile(means, alpha, axis=0), np.quantile(means, 1.0 - alpha, axis=0)
