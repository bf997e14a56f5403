"""The report's statistics against hand-computed values, scipy, and a coverage simulation."""

import math

import numpy as np
import pytest

from hacrl_exp.report.stats import (
    BEAT,
    FELL_SHORT,
    INDISTINGUISHABLE,
    mcnemar_exact,
    mean_t_interval,
    paired_bootstrap,
    paired_test,
    verdict,
)


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (0, 5, 2 / 32),  # 2 · C(5,0)/2^5
        (3, 10, 2 * (1 + 13 + 78 + 286) / 2**13),  # 2 · Σ_{i≤3} C(13,i) / 2^13 = 0.0922852
        (10, 3, 2 * (1 + 13 + 78 + 286) / 2**13),  # symmetric
        (5, 5, 1.0),  # 2 · 638/1024 > 1, capped
        (0, 0, 1.0),  # no discordant pair
        (0, 1, 1.0),
    ],
)
def test_mcnemar_exact_hand_values(b, c, expected):
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_exact_matches_scipy_binomial_test():
    from scipy.stats import binomtest

    for b, c in [(1, 9), (7, 20), (40, 25), (12, 12), (0, 30)]:
        assert mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(ValueError, match="b=-1"):
        mcnemar_exact(-1, 3)


def test_t_interval_hand_value():
    iv = mean_t_interval([1.0, 2.0, 3.0])
    q = 0.975  # Student t with 2 degrees of freedom has a closed-form quantile: (2q − 1) · sqrt(2 / (4q(1 − q)))
    half = (2 * q - 1) * math.sqrt(2 / (4 * q * (1 - q))) * 1.0 / math.sqrt(3)  # t · s/√n with s = 1
    assert (iv.mean, iv.n) == (2.0, 3)
    assert iv.low == pytest.approx(2.0 - half, abs=1e-9) and iv.high == pytest.approx(2.0 + half, abs=1e-9)
    assert iv.half_width == pytest.approx(half, abs=1e-9)
    assert not iv.excludes_zero() and mean_t_interval([1.0, 1.1, 1.2]).excludes_zero()


def test_t_interval_single_value_and_empty():
    one = mean_t_interval([0.4])
    assert (one.mean, one.low, one.high, one.n) == (0.4, 0.4, 0.4, 1)
    assert math.isnan(mean_t_interval([]).mean) and mean_t_interval([]).n == 0
    assert mean_t_interval([0.1, float("nan"), 0.3]).n == 2  # NaNs are dropped


def test_t_interval_level_widens():
    values = [0.2, 0.5, 0.4, 0.3]
    assert mean_t_interval(values, 0.99).half_width > mean_t_interval(values, 0.95).half_width


def test_paired_bootstrap_delta_and_extremes():
    a, b = np.ones(50), np.zeros(50)
    delta, low, high, p = paired_bootstrap(a, b, n_boot=999)
    assert (delta, low, high) == (1.0, 1.0, 1.0)
    assert p == pytest.approx(2 / 1000)  # no resample reaches 0: 2 · (1 + 0) / (B + 1)
    same = paired_bootstrap(a, a, n_boot=999)
    assert same[0] == 0.0 and same[3] == 1.0


def test_paired_bootstrap_category_weights_give_the_mean_over_categories():
    # category x: 2 problems, diffs +1, +1; category y: 4 problems, diffs 0, 0, 0, -1
    a = np.array([1, 1, 0, 0, 0, 0.0])
    b = np.array([0, 0, 0, 0, 0, 1.0])
    weights = np.array([1 / 2, 1 / 2, 1 / 4, 1 / 4, 1 / 4, 1 / 4])
    delta, *_ = paired_bootstrap(a, b, weights=weights, n_boot=10)
    assert delta == pytest.approx(((1 + 1) / 2 + (-1) / 4) / 2)  # mean over categories of per-category Δ
    assert paired_bootstrap(a, b, n_boot=10)[0] == pytest.approx(1 / 6)  # unweighted: mean over problems


def test_paired_bootstrap_clusters_keep_seeds_of_a_problem_together():
    # two seeds of 30 problems; the same problem id at both seeds forms one cluster
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 2, 60).astype(float), rng.integers(0, 2, 60).astype(float)
    ids = np.tile(np.arange(30), 2)
    clustered = paired_bootstrap(a, b, ids, n_boot=500, seed=3)
    assert clustered == paired_bootstrap(a, b, ids, n_boot=500, seed=3)  # seeded: a pure function
    assert clustered[0] == pytest.approx(float((a - b).mean()))


def test_paired_bootstrap_ci_covers_the_true_difference():
    """95% percentile CIs of Δ for Bernoulli pairs with a known true Δ cover it about 95% of the time."""
    rng = np.random.default_rng(0)
    covered, reps = 0, 200
    for rep in range(reps):
        truth = rng.random(300) < 0.5
        a = (rng.random(300) < np.where(truth, 0.7, 0.4)).astype(float)  # P(a) = 0.55
        b = (rng.random(300) < np.where(truth, 0.6, 0.3)).astype(float)  # P(b) = 0.45: true Δ = 0.10
        _, low, high, _ = paired_bootstrap(a, b, n_boot=400, seed=rep)
        covered += low <= 0.10 <= high
    assert 0.88 <= covered / reps <= 0.99


def test_bootstrap_p_agrees_with_the_percentile_interval():
    """p < 0.05 exactly when the 95% percentile CI excludes 0 (the p-value inverts that interval)."""
    rng = np.random.default_rng(5)
    for rep in range(40):
        a = (rng.random(80) < 0.5 + 0.004 * rep).astype(float)
        b = (rng.random(80) < 0.5).astype(float)
        delta, low, high, p = paired_bootstrap(a, b, n_boot=999, seed=rep)
        if delta != 0:
            assert (p < 0.05) == (low > 0 or high < 0) or abs(p - 0.05) < 0.01, (rep, delta, low, high, p)


def test_paired_test_counts_discordant_pairs():
    a = np.array([1, 1, 1, 0, 0, 1.0])
    b = np.array([0, 0, 1, 1, 0, 1.0])
    test = paired_test(a, b, np.arange(6), n_boot=200)
    assert (test.b, test.c, test.pairs, test.problems) == (2, 1, 6, 6)
    assert test.p_mcnemar == pytest.approx(1.0)  # 2 · (C(3,0) + C(3,1))/8 = 1
    assert test.delta == pytest.approx(1 / 6)


def test_verdict_rules():
    assert verdict(0.05, 0.01) == BEAT
    assert verdict(-0.05, 0.01) == FELL_SHORT
    assert verdict(0.05, 0.2) == INDISTINGUISHABLE
    assert verdict(0.0, 0.001) == INDISTINGUISHABLE
    assert verdict(0.05, 0.03, significance=0.01) == INDISTINGUISHABLE
    assert verdict(float("nan"), 0.01) == INDISTINGUISHABLE
