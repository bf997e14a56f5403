"""Power of the report's own rule, by simulation: how often a grid of n seeds would reach a verdict of difference.

The rule ("beat" / "fell short of"): the exact sign-flip p of the per-seed differences, Holm-adjusted over the m
tests of the comparison's family, below `significance`. Holm's first step is p < significance / m, and a test can
only be rejected at a later step with a larger bound, so the power at threshold significance / m is a lower bound of
the power under Holm (it is the power when the comparison is the one test in its family with an effect).

    power(n) = #{simulated grids with sign-flip p < threshold} / draws,   d_s ~ Normal(mean, sd), s = 1 … n

The sign-flip p of a simulated grid: for n ≤ EXACT_MAX_SEEDS the exact count over all 2^n sign patterns (as
stats.sign_flip_p); beyond it the Lugannani–Rice saddlepoint approximation of the sign-flip distribution (Robinson
1982), which the tests check against the exact count. One seeded normal matrix (draws × MAX_SEEDS) gives every n
(common random numbers), so "seeds for 80% power" is found by bisection.
"""

from __future__ import annotations

import math

import numpy as np

EXACT_MAX_SEEDS = 11
MAX_SEEDS = 32
"""The search ends here: a comparison that needs more seeds for 80% power reports "> 32"."""
DRAWS = 500
"""Simulated grids (the report's power_draws): a power of 0.8 has a Monte Carlo SE of about 0.018."""


def saddlepoint_sign_flip_p(d: np.ndarray) -> np.ndarray:
    """Two-sided sign-flip p of each row of d (G, n): 2 · P[Σ ε_i |d_i| ≥ |Σ d_i|] by Lugannani–Rice with the
    cumulant generating function K(t) = Σ log cosh(t |d_i|): t̂ solves K'(t) = Σ |d_i| tanh(t |d_i|) = s,
    w = √(2 (t̂ s − K(t̂))), u = t̂ √K''(t̂), P ≈ 1 − Φ(w) + φ(w) (1/u − 1/w). Rows with every d_i of one sign get the
    exact 2/2^n; rows with s/√Σd_i² < 1 (p > 0.3 for any n) the normal approximation."""
    from scipy.stats import norm

    a = np.abs(d)
    s, total, var = np.abs(d.sum(axis=1)), a.sum(axis=1), (a**2).sum(axis=1)
    safe_var = np.where(var > 0, var, 1.0)
    t = s / safe_var  # the tangent at 0 hits zero left of the root; Newton then climbs to it (K' is concave)
    active = np.flatnonzero(s < total * (1.0 - 1e-12))  # the others are the all-one-sign rows: exact below
    for _ in range(60):
        if not len(active):
            break
        tanh = np.tanh(t[active, None] * a[active])
        slope = np.maximum((a[active] ** 2 * (1.0 - tanh**2)).sum(axis=1), 1e-300)
        step = ((a[active] * tanh).sum(axis=1) - s[active]) / slope
        t[active] = np.maximum(t[active] - step, 0.0)
        active = active[np.abs(step) > 1e-10 * np.maximum(t[active], 1e-12)]
    x = t[:, None] * a
    log_cosh = (x + np.log1p(np.exp(-2.0 * x)) - math.log(2.0)).sum(axis=1)
    k2 = (a**2 * (1.0 - np.tanh(x) ** 2)).sum(axis=1)
    w = np.sqrt(np.maximum(2.0 * (t * s - log_cosh), 1e-300))
    u = np.maximum(t * np.sqrt(k2), 1e-300)
    p = 2.0 * (norm.sf(w) + norm.pdf(w) * (1.0 / u - 1.0 / w))
    z = s / np.sqrt(safe_var)
    p = np.where(z < 1.0, 2.0 * norm.sf(z), p)
    p = np.where(s >= total * (1.0 - 1e-12), 2.0 / 2.0 ** d.shape[1], p)
    return np.clip(np.where(var > 0, p, 1.0), 0.0, 1.0)


class RulePower:
    """power(n) of one comparison's rule at a fixed threshold, from one seeded normal matrix (draws × MAX_SEEDS):
    every n reads its first n columns (common random numbers), so power rises with n up to simulation noise."""

    def __init__(self, mean: float, sd: float, threshold: float, draws: int = DRAWS, seed: int = 0) -> None:
        self.valid = math.isfinite(mean) and math.isfinite(sd) and sd > 0.0
        self.threshold = threshold
        self.d = mean + sd * np.random.default_rng(seed).standard_normal((draws, MAX_SEEDS)) if self.valid else None
        self.cache: dict[int, float] = {}

    def __call__(self, n: int) -> float:
        """The share of simulated grids of n seeds whose sign-flip p < threshold; NaN without a valid mean and sd,
        0 when n < 1 or 2/2^n ≥ threshold (no grid of n seeds can pass)."""
        if not self.valid:
            return math.nan
        if n < 1 or 2.0 / 2.0**n >= self.threshold:
            return 0.0
        if n not in self.cache:
            d = self.d[:, :n]
            if n <= EXACT_MAX_SEEDS:
                bits = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1
                sums = np.abs(d @ (1 - 2 * bits).T.astype(np.float64))
                observed = np.abs(d.sum(axis=1)) - 1e-12 * np.maximum(1.0, np.abs(d).sum(axis=1))
                p = np.count_nonzero(sums >= observed[:, None], axis=1) / 2.0**n
            else:
                p = saddlepoint_sign_flip_p(d)
            self.cache[n] = float(np.mean(p < self.threshold))
        return self.cache[n]


def seeds_for_power(power: RulePower, target: float = 0.8) -> int | None:
    """The fewest seeds n ≤ MAX_SEEDS with power(n) ≥ target, by bisection (power rises with n); None when not
    reached at MAX_SEEDS or not simulated."""
    if not power.valid or power(MAX_SEEDS) < target:
        return None
    low, high = 1, MAX_SEEDS
    while low < high:
        middle = (low + high) // 2
        if power(middle) >= target:
            high = middle
        else:
            low = middle + 1
    return high


def minimum_detectable_effect(
    sd: float, n: int, threshold: float, target: float = 0.8, draws: int = DRAWS, seed: int = 0
) -> float:
    """The minimum detectable effect at n seeds: the smallest mean μ ≥ 0 of the per-seed differences
    (d_s ~ Normal(μ, sd)) whose rule power (RulePower at `threshold`) reaches `target`, by bisection on μ to
    0.1% of sd. NaN without a finite sd > 0; inf when no grid of n seeds can pass (2/2^n ≥ threshold) or even
    μ = 20 sd does not reach the target."""
    if not (math.isfinite(sd) and sd > 0.0) or n < 1:
        return math.nan
    if 2.0 / 2.0**n >= threshold:
        return math.inf

    def power(mu: float) -> float:
        return RulePower(mu, sd, threshold, draws, seed)(n)

    low, high = 0.0, 20.0 * sd
    if power(high) < target:
        return math.inf
    while high - low > 1e-3 * sd:
        middle = (low + high) / 2.0
        low, high = (low, middle) if power(middle) >= target else (middle, high)
    return high


def null_grids(base: float, shift: float, problems: int, seeds: int, draws: int, rng: np.random.Generator,
               seed_sd: float, run_sd: float) -> np.ndarray:  # fmt: skip
    """Per-seed differences d = A − B of `draws` simulated grids (draws, seeds), bounded and tied like the grids':
    a seed's warm start q_s = base + seed_sd · z_s (shared by A and B, as a paired seed is); each run's accuracy
    Binomial(problems, clip(q_s + run_sd · u + shift for A, 0, 1)) / problems, so accuracies are in steps of
    1/problems and ties happen."""
    q = base + seed_sd * rng.standard_normal((draws, seeds))
    b = rng.binomial(problems, np.clip(q + run_sd * rng.standard_normal(q.shape), 0.0, 1.0)) / problems
    a = rng.binomial(problems, np.clip(q + shift + run_sd * rng.standard_normal(q.shape), 0.0, 1.0)) / problems
    return a - b


def type_one_errors(base: float, problems: int, seeds: int = 10, effect: float = 0.0333, alpha: float = 0.05,
                    draws: int = 2000, seed: int = 0, seed_sd: float = 0.02,
                    run_sd: float = 0.02) -> dict[str, float]:  # fmt: skip
    """The rejection rate of each test of the report at its null boundary, on null_grids (a fixed RNG seed):
        difference   μ = 0        two-sided sign-flip p < α    (and the two-sided t-test)
        equivalence  μ = +m       TOST p < α, m = effect / 2    (sign-flip and t)
        refutation   μ = δ        one-sided p < α, δ = effect   (sign-flip and t)
    A valid test rejects in at most α of the grids (up to the Monte Carlo SE √(α(1 − α)/draws)). Grids with no
    spread (every seed the same difference) are counted as not rejected, as the report does (NaN p)."""
    from scipy.stats import t

    from hacrl_exp.report.stats import flip_tail

    rng = np.random.default_rng(seed)
    margin = effect / 2.0

    def spread(d: np.ndarray) -> np.ndarray:
        return d.std(axis=1, ddof=1) > 0.0

    def t_stat(d: np.ndarray, shift: float) -> np.ndarray:
        se = d.std(axis=1, ddof=1) / math.sqrt(d.shape[1])
        return (d.mean(axis=1) - shift) / np.where(se > 0, se, np.inf)

    out = {}
    d = null_grids(base, 0.0, problems, seeds, draws, rng, seed_sd, run_sd)
    out["difference, sign-flip"] = float(np.mean(flip_tail(d, "two") < alpha))
    out["difference, t"] = float(np.mean(spread(d) & (2 * t.sf(np.abs(t_stat(d, 0.0)), seeds - 1) < alpha)))
    d = null_grids(base, margin, problems, seeds, draws, rng, seed_sd, run_sd)
    flip = np.maximum(flip_tail(d + margin, "greater"), flip_tail(d - margin, "less"))
    t_p = np.maximum(t.sf(t_stat(d, -margin), seeds - 1), t.cdf(t_stat(d, margin), seeds - 1))
    out["equivalence, sign-flip"] = float(np.mean(spread(d) & (flip < alpha)))
    out["equivalence, t"] = float(np.mean(spread(d) & (t_p < alpha)))
    d = null_grids(base, effect, problems, seeds, draws, rng, seed_sd, run_sd)
    out["refutation, sign-flip"] = float(np.mean(spread(d) & (flip_tail(d - effect, "less") < alpha)))
    out["refutation, t"] = float(np.mean(spread(d) & (t.cdf(t_stat(d, effect), seeds - 1) < alpha)))
    return out
