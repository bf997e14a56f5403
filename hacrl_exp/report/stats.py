"""Statistics of the comparison report. Pure functions of numpy arrays; every random draw comes from a seeded generator.

Across seeds (one value per seed, n seeds):
    mean ± t-interval    x̄ ± t_{1−a/2, n−1} · s/√n,  s = sample std (divisor n − 1), a = 1 − level
                         n = 1 gives the point estimate on both sides (no spread to estimate)
Paired per problem (pairs (seed, problem) of 0/1 scores x_i for method A, y_i for method B, d_i = x_i − y_i):
    Δ                    Σ w_i d_i / Σ w_i over all pairs; w_i = 1/(size of i's category) makes it the mean over
                         categories, as accuracy/mean is (w_i = 1 for a single category: the plain mean)
    paired bootstrap     resample problem ids with replacement (a problem carries all its seeds: a cluster), B times;
                         CI = percentiles of the resampled Δ*; two-sided p = min(1, 2 · (1 + #{Δ* on the far side
                         of 0}) / (B + 1)), far side = Δ* ≤ 0 when Δ > 0, Δ* ≥ 0 when Δ < 0 (the percentile interval
                         inverted: its level-(1 − p) interval just reaches 0, so "CI excludes 0" ⟺ "p < 1 − level")
    exact McNemar        b = #{x=1, y=0}, c = #{x=0, y=1};  p = min(1, 2 · Σ_{i ≤ min(b, c)} C(b+c, i) / 2^(b+c));
                         p = 1 when b + c = 0. It treats the pairs as independent (pooled seeds included).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def t_quantile(q: float, dof: int) -> float:
    """The q-quantile of Student's t with `dof` degrees of freedom (scipy's, which mlflow installs)."""
    from scipy.stats import t

    return float(t.ppf(q, dof))


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval and the number of values it came from."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def excludes_zero(self) -> bool:
        return self.low > 0.0 or self.high < 0.0


def mean_t_interval(values, level: float = 0.95) -> Interval:
    """Mean and t-interval across seeds: x̄ ± t_{(1+level)/2, n−1} · s/√n (s with divisor n − 1)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    if len(x) < 2:
        return Interval(mean, mean, mean, len(x))
    half = t_quantile((1.0 + level) / 2.0, len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return Interval(mean, mean - half, mean + half, len(x))


@dataclass(frozen=True)
class PairedTest:
    """A paired comparison of A against B over (seed, problem) pairs: Δ = mean(A − B), its bootstrap CI, p-values."""

    delta: float
    low: float
    high: float
    p_bootstrap: float
    b: int
    """Pairs A got right and B wrong."""
    c: int
    """Pairs B got right and A wrong."""
    p_mcnemar: float
    pairs: int
    problems: int


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: min(1, 2 · P[Binomial(b + c, 1/2) ≤ min(b, c)]); 1 when b + c = 0."""
    if b < 0 or c < 0:
        raise ValueError(f"McNemar counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def paired_bootstrap(
    a, b, clusters=None, weights=None, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float, float]:
    """Δ = Σ w(a − b) / Σ w, its percentile-bootstrap CI and two-sided p, resampling clusters (problem ids).

    a, b: (M,) paired scores; clusters: (M,) labels, pairs with one label are drawn together (default: every pair
    its own cluster); weights: (M,) per-pair weights (default 1; 1/|category| makes Δ a mean over categories).
    Returns (Δ, low, high, p) with p = min(1, 2 · (1 + #{Δ* on the far side of 0}) / (n_boot + 1)).
    """
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.ndim != 1 or len(d) == 0:
        raise ValueError(f"paired_bootstrap needs two equal-length, non-empty 1-D arrays, got shape {d.shape}")
    w = np.ones_like(d) if weights is None else np.asarray(weights, dtype=np.float64)
    labels = np.arange(len(d)) if clusters is None else np.asarray(clusters)
    _, inverse = np.unique(labels, return_inverse=True)
    sums = np.bincount(inverse, weights=w * d)  # per cluster: a resample's Δ is Σ sums / Σ mass
    mass = np.bincount(inverse, weights=w)
    delta = float(sums.sum() / mass.sum())
    if len(sums) < 2 or n_boot < 1:
        return delta, delta, delta, 1.0
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(sums), size=(n_boot, len(sums)))
    resampled = sums[draws].sum(axis=1) / mass[draws].sum(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(resampled, [tail, 1.0 - tail])
    far = np.count_nonzero(resampled <= 0.0) if delta > 0 else np.count_nonzero(resampled >= 0.0)
    p = 1.0 if delta == 0 else 2.0 * (1.0 + far) / (n_boot + 1.0)
    return delta, float(low), float(high), float(min(1.0, p))


def paired_test(a, b, clusters, weights=None, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> PairedTest:
    """Paired bootstrap (clustered by `clusters`) and exact McNemar for 0/1 scores a (method A) and b (method B)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    delta, low, high, p = paired_bootstrap(a, b, clusters, weights, n_boot, seed, level)
    wins, losses = int(np.sum((a >= 0.5) & (b < 0.5))), int(np.sum((a < 0.5) & (b >= 0.5)))
    return PairedTest(
        delta, low, high, p, wins, losses, mcnemar_exact(wins, losses), len(a), len(np.unique(np.asarray(clusters)))
    )


BEAT, FELL_SHORT, INDISTINGUISHABLE = "beat", "fell short of", "was indistinguishable from"


def verdict(delta: float, p: float, significance: float = 0.05) -> str:
    """BEAT (Δ > 0 and p < significance), FELL_SHORT (Δ < 0 and p < significance), else INDISTINGUISHABLE."""
    if not (math.isfinite(delta) and math.isfinite(p)) or p >= significance or delta == 0:
        return INDISTINGUISHABLE
    return BEAT if delta > 0 else FELL_SHORT
