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
Across seeds, paired by seed (the primary test: d_s = A_s − B_s, one difference per seed s, n seeds):
    paired t-interval    d̄ ± t_{(1+level)/2, n−1} · s_d/√n (mean_t_interval of the differences)
    sign-flip p          exact permutation test of "d is symmetric about 0": p = #{ε ∈ {±1}^n : |Σ ε_i d_i| ≥ |Σ d_i|}
                         / 2^n (all 2^n sign assignments; valid for any n ≥ 1; smallest possible p is 2/2^n)
    Holm                 p_(1) ≤ … ≤ p_(m) sorted; adjusted p_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j))
    one-sided sign-flip  H0: d symmetric about μ0 with μ ≥ μ0 ("less") or μ ≤ μ0 ("greater"); x = d − μ0:
                         p_less = #{ε : Σ ε_i x_i ≤ Σ x_i} / 2^n = #{K ⊆ seeds : K = ∅ or mean_K d ≥ μ0} / 2^n
                         (flipping the seeds K), p_greater likewise with ≥ / ≤; smallest possible p is 1/2^n
    TOST                 equivalence within ±m, two one-sided sign-flip tests:
                         p = max(p_greater(d, −m), p_less(d, +m)); "matched" when its Holm-adjusted p < α
    one-sided bound      upper = v_k, the k-th largest of the 2^n values {+∞ (K = ∅)} ∪ {mean_K d}, k = ⌈α · 2^n⌉:
                         the sign-flip test inverted, so p_less(d, δ) < α ⟺ upper < δ (α = significance)
    refutation p         H0: μ ≥ δ (the hypothesised effect) against μ < δ: p = p_less(d, δ); "refuted" when p < α
    one test family      difference, equivalence and refutation are all the exact sign-flip test (of d − 0, d ± m,
                         d − δ); tost_p and refute_p are NaN when s_d = 0 (every seed the same difference: no spread
                         to test with) or n < 2. t-versions (t_tost_p, t_refute_p) are kept for the type-I simulation
    seeds ahead          #{d_s > 1e-12}, tied #{|d_s| ≤ 1e-12}, behind #{d_s < −1e-12} (float noise is a tie)
    seed-and-problem     percentile interval of an accuracy mean (stays in [0, 1]): resample the seeds, and the problems
    bootstrap            (a problem carries all its seeds), with replacement; statistic = mean over the drawn seeds of
                         the weighted accuracy over the drawn problems
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=4096)
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


def _finite_or_point(values) -> tuple[np.ndarray, Interval | None]:
    """The finite values, and the interval itself when fewer than 2 leave no spread (NaN when none, else the point)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return x, Interval(math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    return x, Interval(mean, mean, mean, len(x)) if len(x) < 2 else None


def mean_t_interval(values, level: float = 0.95) -> Interval:
    """Mean and t-interval across seeds: x̄ ± t_{(1+level)/2, n−1} · s/√n (s with divisor n − 1)."""
    x, point = _finite_or_point(values)
    if point is not None:
        return point
    mean = float(x.mean())
    half = t_quantile((1.0 + level) / 2.0, len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return Interval(mean, mean - half, mean + half, len(x))


def seed_bootstrap_interval(values, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> Interval:
    """Mean over seeds and its percentile bootstrap interval: seeds resampled with replacement B times, the
    ((1 − level)/2, (1 + level)/2) quantiles of the resampled means. It never leaves [min x, max x], so a share stays
    inside [0, 1]; with few seeds it is narrower than the t-interval (the verdicts use the t-interval and the sign-flip
    test, not this)."""
    x, point = _finite_or_point(values)
    if point is not None:
        return point
    means = x[np.random.default_rng(seed).integers(0, len(x), size=(n_boot, len(x)))].mean(axis=1)
    low, high = np.quantile(means, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return Interval(float(x.mean()), float(low), float(high), len(x))


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


# ---- across seeds: the primary test of a comparison -------------------------------------------------------------

SIGN_FLIP_EXACT_MAX = 16
"""Up to this many seeds every one of the 2^n sign assignments is enumerated (65 536 rows); above, a seeded draw."""


@lru_cache(maxsize=32)
def sign_patterns(n: int) -> np.ndarray:
    """Every ε ∈ {±1}^n as the rows of a (2^n, n) float matrix; row 0 is all +1 (no seed flipped)."""
    bits = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1
    return (1 - 2 * bits).astype(np.float64)


def flip_tail(x: np.ndarray, side: str, draws: int = 100_000, seed: int = 0) -> np.ndarray:
    """Sign-flip p of each row of x (G, n), the share of sign patterns ε whose Σ ε_i x_i is at least as extreme as
    the observed Σ x_i: side "two" |Σ ε x| ≥ |Σ x|, "less" Σ ε x ≤ Σ x, "greater" Σ ε x ≥ Σ x. Exact over all 2^n
    patterns for n ≤ SIGN_FLIP_EXACT_MAX, else (1 + #hits) / (draws + 1) over seeded random ε. A sum equal to the
    observed one up to rounding (1e-12 · max(1, Σ|x|)) counts as reaching it. Returns (G,)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = x.shape[1]
    exact = n <= SIGN_FLIP_EXACT_MAX
    signs = sign_patterns(n) if exact else np.random.default_rng(seed).choice([-1.0, 1.0], size=(draws, n))
    sums, observed = x @ signs.T, x.sum(axis=1, keepdims=True)
    tolerance = 1e-12 * np.maximum(1.0, np.abs(x).sum(axis=1, keepdims=True))
    if side == "two":
        hits = np.abs(sums) >= np.abs(observed) - tolerance
    elif side == "less":
        hits = sums <= observed + tolerance
    elif side == "greater":
        hits = sums >= observed - tolerance
    else:
        raise ValueError(f"side={side!r}: use 'two', 'less' or 'greater'")
    count = np.count_nonzero(hits, axis=1)
    return count / 2.0**n if exact else (1.0 + count) / (draws + 1.0)


def _finite(differences) -> np.ndarray:
    d = np.asarray(differences, dtype=np.float64)
    return d[np.isfinite(d)]


def sign_flip_p(differences, draws: int = 100_000, seed: int = 0) -> float:
    """Two-sided sign-flip permutation p of the per-seed differences d (H0: d symmetric about 0):
    p = #{ε ∈ {±1}^n : |Σ ε_i d_i| ≥ |Σ d_i|} / 2^n, enumerated exactly for n ≤ SIGN_FLIP_EXACT_MAX
    (above: (1 + #hits) / (draws + 1) over random ε). NaN for n = 0; 1 when every d_i is 0."""
    d = _finite(differences)
    return math.nan if len(d) == 0 else float(flip_tail(d, "two", draws, seed)[0])


def sign_flip_one_sided(differences, shift: float, side: str, draws: int = 100_000, seed: int = 0) -> float:
    """One-sided sign-flip p of d − shift (module docstring): side "less" tests H0 μ ≥ shift against μ < shift,
    "greater" H0 μ ≤ shift against μ > shift. NaN when n < 2, s_d = 0 (no spread) or the shift is not finite."""
    d = _finite(differences)
    if len(d) < 2 or not math.isfinite(shift) or float(d.std(ddof=1)) == 0.0:
        return math.nan
    return float(flip_tail(d - shift, side, draws, seed)[0])


def holm(p_values) -> np.ndarray:
    """Holm step-down adjusted p-values, in the input order: with p_(1) ≤ … ≤ p_(m),
    adjusted p_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j)). NaN entries stay NaN and are not counted in m."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full_like(p, np.nan)
    valid = np.flatnonzero(np.isfinite(p))
    m = len(valid)
    order = valid[np.argsort(p[valid], kind="stable")]
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[index]))
        out[index] = running
    return out


def tost_p(differences, margin: float) -> float:
    """Equivalence within ±margin by two one-sided sign-flip tests on the per-seed differences d:
    p = max(p_greater(d, −margin), p_less(d, +margin)). NaN when n < 2 or s_d = 0: with no spread there is nothing
    to test against (identical seeds, e.g. all at accuracy 0, are a degenerate case, not evidence of equivalence)."""
    return max(sign_flip_one_sided(differences, -margin, "greater"), sign_flip_one_sided(differences, margin, "less"))


def t_tost_p(differences, margin: float) -> float:
    """TOST by two one-sided t-tests (the rule before issue 38; kept for the type-I simulation):
    p = max(P[T_{n−1} ≥ (d̄ + margin)/(s_d/√n)], P[T_{n−1} ≤ (d̄ − margin)/(s_d/√n)]); NaN when n < 2 or s_d = 0."""
    from scipy.stats import t

    mean, se, n = _mean_se(differences)
    if n < 2 or not se > 0.0:
        return math.nan
    return max(float(t.sf((mean + margin) / se, n - 1)), float(t.cdf((mean - margin) / se, n - 1)))


TIE = 1e-12
"""Per-seed differences within ±TIE are ties: accuracies are counts over totals, so anything smaller is rounding."""


def seed_counts(differences) -> tuple[int, int, int]:
    """(ahead, tied, behind): how many per-seed differences d_s are > TIE, within ±TIE, < −TIE (NaN ones left out)."""
    d = np.asarray(differences, dtype=np.float64)
    d = d[np.isfinite(d)]
    return int(np.sum(d > TIE)), int(np.sum(np.abs(d) <= TIE)), int(np.sum(d < -TIE))


def _mean_se(differences) -> tuple[float, float, int]:
    """(d̄, s_d/√n, n) of the finite differences; se NaN when n < 2."""
    d = np.asarray(differences, dtype=np.float64)
    d = d[np.isfinite(d)]
    n = len(d)
    if n < 2:
        return (float(d.mean()) if n else math.nan), math.nan, n
    return float(d.mean()), float(d.std(ddof=1)) / math.sqrt(n), n


def one_sided_upper(differences, alpha: float = 0.05) -> float:
    """The one-sided (1 − α) upper bound of the sign-flip test inverted: the k-th largest of {+∞} ∪ {mean_K d :
    K a non-empty subset of the seeds}, k = ⌈α · 2^n⌉ (exact for n ≤ SIGN_FLIP_EXACT_MAX; above, K over seeded
    random subsets). refute_p(d, δ) < α ⟺ one_sided_upper(d, α) < δ. NaN when n < 2; d̄ when s_d = 0."""
    d = _finite(differences)
    n = len(d)
    if n < 2:
        return math.nan
    if float(d.std(ddof=1)) == 0.0:
        return float(d.mean())
    flipped = (1.0 - sign_patterns(n)) / 2.0 if n <= SIGN_FLIP_EXACT_MAX else None
    if flipped is None:
        flipped = np.random.default_rng(0).integers(0, 2, size=(100_000, n)).astype(np.float64)
    size = flipped.sum(axis=1)
    means = np.where(size > 0, flipped @ d / np.maximum(size, 1.0), math.inf)
    k = math.ceil(alpha * len(means) - 1e-9)
    return float(np.sort(means)[::-1][max(k, 1) - 1])


def t_upper(differences, alpha: float = 0.05) -> float:
    """The one-sided (1 − α) t upper bound d̄ + t_{1−α, n−1} · s_d/√n (NaN when n < 2; d̄ when s_d = 0)."""
    mean, se, n = _mean_se(differences)
    if n < 2:
        return math.nan
    return mean + t_quantile(1.0 - alpha, n - 1) * se


def refute_p(differences, effect: float) -> float:
    """One-sided sign-flip test of H0: μ ≥ effect (the hypothesised gain holds) against μ < effect, on the per-seed
    differences: p = p_less(d, effect) = #{K : K = ∅ or mean_K d ≥ effect} / 2^n. p < α ⟺ one_sided_upper(d, α) <
    effect. NaN when n < 2, s_d = 0 (no spread to test with, as in tost_p) or the effect is not finite."""
    return sign_flip_one_sided(differences, effect, "less")


def t_refute_p(differences, effect: float) -> float:
    """The one-sided t-test of H0: μ ≥ effect (the rule before issue 38; kept for the type-I simulation):
    p = P[T_{n−1} ≤ (d̄ − effect)/(s_d/√n)]; NaN when n < 2, s_d = 0 or the effect is not finite."""
    from scipy.stats import t

    mean, se, n = _mean_se(differences)
    if n < 2 or not math.isfinite(effect) or not se > 0.0:
        return math.nan
    return float(t.cdf((mean - effect) / se, n - 1))


def seed_problem_bootstrap(
    scores, weights=None, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of an accuracy mean over seeds and problems, resampling both (stays in [0, 1]).

    scores: (S, P) per-seed, per-problem scores in [0, 1] (NaN: problem not answered at that seed); weights: (P,)
    per-problem weights (1/|category| makes a seed's value the mean over categories). One resample draws S seeds and
    P problems with replacement (a problem keeps its column across seeds) and takes the mean over the drawn seeds of
    Σ w·x / Σ w over the drawn problems. Returns (low, high); (nan, nan) without a score.
    """
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2 or x.size == 0 or not np.isfinite(x).any():
        return math.nan, math.nan
    w = np.ones(x.shape[1]) if weights is None else np.asarray(weights, dtype=np.float64)
    mask = np.isfinite(x)
    values, mass = np.where(mask, x, 0.0) * w, mask * w  # (S, P) weighted scores and the weight actually present
    rng = np.random.default_rng(seed)
    n_seeds, n_problems = x.shape
    out = np.empty(max(n_boot, 1))
    for i in range(len(out)):  # a loop keeps memory at O(S·P) whatever B is
        rows = rng.integers(0, n_seeds, n_seeds)
        cols = np.bincount(rng.integers(0, n_problems, n_problems), minlength=n_problems)  # draws per problem
        num, den = values[rows] @ cols, mass[rows] @ cols
        per_seed = num[den > 0] / den[den > 0]
        out[i] = per_seed.mean() if len(per_seed) else np.nan
    tail = (1.0 - level) / 2.0
    low, high = np.nanquantile(out, [tail, 1.0 - tail])
    return float(low), float(high)


MATCHED, REFUTED, NOT_ESTABLISHED = "matched", "refuted", "not established"
UNTESTABLE = "untestable (ceiling)"
SYMBOL = {BEAT: "▲", FELL_SHORT: "▼", MATCHED: "≈", REFUTED: "✗", NOT_ESTABLISHED: "○", UNTESTABLE: "⊤"}
"""Compact verdict symbols: ▲ A above B, ▼ A below B, ≈ equivalent within the margin, ✗ the hypothesised gain of A
over B excluded, ○ none of these established, ⊤ B has less room (to 1, or to 0) than the effect tested."""


def seed_verdict(
    delta: float,
    p_holm: float,
    p_tost_holm: float,
    p_refute_holm: float = math.nan,
    significance: float = 0.05,
    ceiling: bool = False,
) -> str:
    """The verdict of a comparison from its Holm-adjusted across-seed tests, first that passes (p < significance):
    BEAT / FELL_SHORT (sign-flip; Δ above / below 0); then UNTESTABLE when `ceiling` (B's room is below the effect
    the comparison tests: hacrl_exp.report.rules.untestable, so "matched" and "refuted" would be forced); MATCHED
    (TOST within the margin), REFUTED (the one-sided test that excludes the hypothesised effect), else
    NOT_ESTABLISHED."""

    def passes(p: float) -> bool:
        return math.isfinite(p) and p < significance

    if math.isfinite(delta) and delta != 0 and passes(p_holm):
        return BEAT if delta > 0 else FELL_SHORT
    if ceiling:
        return UNTESTABLE
    if passes(p_tost_holm):
        return MATCHED
    if passes(p_refute_holm):
        return REFUTED
    return NOT_ESTABLISHED
