"""The report's statistics against hand-computed values, scipy, and a coverage simulation."""

import math

import numpy as np
import pytest

from hacrl_exp.report.stats import (
    BEAT,
    FELL_SHORT,
    INDISTINGUISHABLE,
    MATCHED,
    NOT_ESTABLISHED,
    REFUTED,
    UNTESTABLE,
    Interval,
    holm,
    mcnemar_exact,
    mean_t_interval,
    one_sided_upper,
    paired_bootstrap,
    paired_test,
    refute_p,
    seed_bootstrap_interval,
    seed_counts,
    seed_problem_bootstrap,
    seed_verdict,
    sign_flip_one_sided,
    sign_flip_p,
    t_refute_p,
    t_tost_p,
    t_upper,
    tost_p,
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


# ---- across-seed inference -------------------------------------------------------------------------------------


def t2_cdf(x: float) -> float:
    """Student t with 2 degrees of freedom has a closed-form CDF: 1/2 + x / (2 · sqrt(2 + x²))."""
    return 0.5 + x / (2.0 * math.sqrt(2.0 + x * x))


def test_sign_flip_p_n3_hand_enumeration():
    # d = (0.1, 0.2, −0.05), |Σ d| = 0.25. The 8 signed sums: +++ 0.25, ++− 0.35, +−+ −0.15, +−− −0.05,
    # −++ 0.05, −+− 0.15, −−+ −0.35, −−− −0.25: four reach |0.25| (+++, ++−, −−+, −−−), so p = 4/8.
    assert sign_flip_p([0.1, 0.2, -0.05]) == pytest.approx(4 / 8)
    # all of one sign: only +++ and −−− reach the observed sum: p = 2/8, the smallest p 3 seeds can give
    assert sign_flip_p([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)
    assert sign_flip_p([-0.02, -0.01, -0.03]) == pytest.approx(2 / 8)


def test_sign_flip_p_n4_hand_enumeration():
    # d = (0.3, 0.1, 0.2, −0.1), Σ d = 0.5. With ε1 = +, the sums over (ε2, ε3, ε4): +++ 0.5 ✓, ++− 0.7 ✓, +−+ 0.1,
    # +−− 0.3, −++ 0.3, −+− 0.5 ✓, −−+ −0.1, −−− 0.1: 3 of 8 reach 0.5; ε1 = − mirrors them: p = 6/16.
    # The two ties at exactly 0.5 count (the float sums differ from 0.5 in the last bits).
    assert sign_flip_p([0.3, 0.1, 0.2, -0.1]) == pytest.approx(6 / 16)
    assert sign_flip_p([0.1, 0.1, 0.1, 0.1]) == pytest.approx(2 / 16)


def test_sign_flip_p_edges_and_large_n():
    assert math.isnan(sign_flip_p([])) and sign_flip_p([0.0, 0.0, 0.0]) == 1.0
    assert sign_flip_p([0.3]) == 1.0  # one seed: both signs reach |d|
    assert sign_flip_p([0.1, float("nan"), 0.2]) == pytest.approx(2 / 4)  # NaNs dropped: n = 2
    # above the exact limit a seeded draw: 20 equal positive differences give p ≈ 2 / 2^20, i.e. (1 + 0)/(draws + 1)
    assert sign_flip_p(np.full(20, 0.1), draws=999) == pytest.approx(1 / 1000)


def test_holm_hand_values():
    # sorted 0.005, 0.01, 0.03, 0.04 (m = 4): 4·0.005 = 0.02; 3·0.01 = 0.03; 2·0.03 = 0.06; max(0.06, 1·0.04) = 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # capped at 1: 2·0.6 = 1.2 → 1, then max(1, 0.7) = 1
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])
    # NaN stays NaN and is not counted: m = 2, 2·0.02 = 0.04, max(0.04, 0.5) = 0.5
    adjusted = holm([0.02, float("nan"), 0.5])
    assert adjusted[0] == pytest.approx(0.04) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.5)
    assert holm([0.3]) == pytest.approx([0.3]) and len(holm([])) == 0


def test_tost_hand_values():
    # two one-sided sign-flip tests: p_less(d, m) = #{K : K = ∅ or mean_K d ≥ m} / 2^n, p_greater(d, −m) likewise
    # d = (0.01, 0, −0.01), m = 0.02: no non-empty subset mean reaches ±0.02, so both sides are 1/8
    assert tost_p([0.01, 0.0, -0.01], 0.02) == pytest.approx(1 / 8)
    # d = (0.03, 0.01, 0.02) on the margin: subsets with mean ≥ 0.02 are ∅, {a}, {c}, {a, b}, {a, c}, {a, b, c}: 6/8
    assert tost_p([0.03, 0.01, 0.02], 0.02) == pytest.approx(6 / 8)
    assert tost_p([0.03, 0.01, 0.02], 0.05) == pytest.approx(1 / 8)  # every subset mean inside ±0.05
    # the old t-version stays for the simulation: (0.01, 0, −0.01), t = 0.02/se = 3.4641 at df 2
    se = 0.01 / math.sqrt(3)
    assert t_tost_p([0.01, 0.0, -0.01], 0.02) == pytest.approx(1 - t2_cdf(0.02 / se), rel=1e-9)
    assert math.isnan(tost_p([0.01], 0.02))  # one seed: no spread
    assert math.isnan(tost_p([0.01, 0.01], 0.02)) and math.isnan(tost_p([0.0, 0.0, 0.0], 0.02))  # s = 0


def test_paired_t_interval_of_differences_hand_value():
    # per-seed differences (0.15, 0.15, −0.05): d̄ = 0.08333, s = sqrt(((1/15)² · 2 + (2/15)²) / 2) = 0.11547;
    # t(0.975, 2) = 4.302653 (closed form (2q − 1) · sqrt(2 / (4q(1 − q))), q = 0.975); half = t · s / √3 = 0.28684
    iv = mean_t_interval([0.15, 0.15, -0.05])
    q = 0.975
    t = (2 * q - 1) * math.sqrt(2 / (4 * q * (1 - q)))
    s = math.sqrt(((1 / 15) ** 2 * 2 + (2 / 15) ** 2) / 2)
    assert t == pytest.approx(4.302653, abs=1e-6) and s == pytest.approx(0.11547, abs=1e-5)
    assert iv.mean == pytest.approx(0.25 / 3)
    assert (iv.low, iv.high) == pytest.approx((0.25 / 3 - t * s / math.sqrt(3), 0.25 / 3 + t * s / math.sqrt(3)))
    assert iv.half_width == pytest.approx(0.28684, abs=1e-5)


def test_refutation_and_its_one_sided_bound_hand_values():
    # d = (0.01, 0, −0.01): H0 μ ≥ δ; p = #{K : K = ∅ or mean_K d ≥ δ} / 8; the largest subset mean is 0.01
    d = [0.01, 0.0, -0.01]
    assert refute_p(d, 0.033) == pytest.approx(1 / 8) and refute_p(d, 0.01) == pytest.approx(2 / 8)
    # the bound is the k-th largest of {+∞} ∪ subset means, k = ⌈α · 2^n⌉: at α = 0.05 k = 1 (+∞: 3 seeds can never
    # refute at 5%), at α = 0.25 k = 2 → 0.01; refuted ⟺ bound < δ
    assert one_sided_upper(d, 0.05) == math.inf and one_sided_upper(d, 0.25) == pytest.approx(0.01)
    assert refute_p(d, 0.0101) < 0.25 <= refute_p(d, 0.01)
    # the issue's opt_char HACPO − GSPO×2 over 10 seeds: no seed reaches +0.02, so only K = ∅ counts: p = 1/1024
    issue = [-0.0275, -0.005, -0.01, -0.035, 0.005, 0, 0.0125, -0.01, -0.005, -0.0125]
    assert refute_p(issue, 0.02) == refute_p(issue, 0.0333) == pytest.approx(1 / 1024)
    assert (mean_t_interval(issue).low, mean_t_interval(issue).high) == pytest.approx((-0.01888, 0.00138), abs=1e-5)
    assert one_sided_upper(issue) < 0.0125 < 0.02  # k = 52 of 1024
    rng = np.random.default_rng(3)  # the duality on random data, several δ around the bound
    for _ in range(20):
        x = rng.normal(0.01, 0.02, size=8).round(3)
        upper = one_sided_upper(x, 0.05)
        for delta in (upper - 1e-6, upper + 1e-6):
            assert (refute_p(x, delta) < 0.05) == (upper < delta)
    # the old t-version: p = F_t(2)((0 − 0.033)/se)
    se = 0.01 / math.sqrt(3)
    assert t_refute_p(d, 0.033) == pytest.approx(t2_cdf(-0.033 / se), rel=1e-9)
    assert t_upper(d, 0.05) == pytest.approx(0.9 * math.sqrt(2 / 0.19) * se, rel=1e-9)
    # no spread, one seed, or no effect: nothing to test
    assert math.isnan(refute_p([0.0, 0.0], 0.03)) and math.isnan(refute_p([0.01], 0.03))
    assert math.isnan(refute_p(d, math.nan)) and math.isnan(one_sided_upper([0.01]))


def test_one_sided_sign_flip_is_exact_on_hand_values():
    # d = (0.02, 0.01), shift 0: patterns (+,+) 0.03, (−,+) −0.01, (+,−) 0.01, (−,−) −0.03; observed 0.03
    assert sign_flip_one_sided([0.02, 0.01], 0.0, "greater") == pytest.approx(1 / 4)
    assert sign_flip_one_sided([0.02, 0.01], 0.0, "less") == pytest.approx(1.0)
    assert sign_flip_one_sided([0.02, 0.01], 0.015, "less") == pytest.approx(3 / 4)  # x = ±0.005: ties count
    with pytest.raises(ValueError, match="side="):
        sign_flip_one_sided([0.02, 0.01], 0.0, "both")


def test_seed_counts_count_float_noise_as_ties():
    # the issue's gpt2_bpe vs −Clip: a 1.1e−16 difference is a tie, not a win (7 ahead, 1 tie, 2 behind; not 8/10)
    d = [0.0075, -0.0125, 0.02, 0.0075, 1.11022e-16, 0.0175, 0.02, 0.1, -0.0075, 0.005]
    assert seed_counts(d) == (7, 1, 2)
    assert seed_counts([5.6e-17, -5.6e-17, 0.0, 1e-11, -1e-11, float("nan")]) == (1, 3, 1)


def test_seed_problem_bootstrap_stays_in_unit_interval():
    rng = np.random.default_rng(2)
    scores = (rng.random((3, 120)) < np.array([[0.95], [0.9], [0.99]])).astype(float)
    low, high = seed_problem_bootstrap(scores, n_boot=400, seed=1)
    assert 0.0 <= low <= scores.mean() <= high <= 1.0
    assert seed_problem_bootstrap(np.ones((3, 50)), n_boot=100) == (1.0, 1.0)  # a t-interval would not be
    assert seed_problem_bootstrap(scores, n_boot=400, seed=1) == (low, high)  # seeded
    assert all(math.isnan(x) for x in seed_problem_bootstrap(np.full((2, 3), np.nan)))


def test_seed_problem_bootstrap_weights_and_seed_spread():
    # weights 1/|category| make a seed's value the mean over categories: category a (1 problem, always right),
    # category b (3 problems, never right) → 0.5 at every resample that draws both, never 0.25 (the problem mean)
    scores = np.array([[1.0, 0.0, 0.0, 0.0]] * 2)
    low, high = seed_problem_bootstrap(scores, weights=np.array([1.0, 1 / 3, 1 / 3, 1 / 3]), n_boot=300)
    assert 0.0 <= low <= 0.5 <= high <= 1.0
    # seeds that disagree widen the interval against seeds that agree on the same mean
    agree = np.tile((np.arange(200) < 100).astype(float), (4, 1))
    disagree = np.stack([(np.arange(200) < k).astype(float) for k in (40, 160, 40, 160)])
    width = [np.subtract(*seed_problem_bootstrap(x, n_boot=500, seed=0)[::-1]) for x in (agree, disagree)]
    assert width[1] > 1.5 * width[0]


def test_seed_verdict_rules():
    # arguments: Δ, Holm p of the sign-flip, of the TOST, of the refutation; first that passes wins
    assert seed_verdict(0.05, 0.01, 0.9) == BEAT
    assert seed_verdict(-0.05, 0.01, 0.9, 0.001) == FELL_SHORT  # a difference outranks a refutation
    assert seed_verdict(0.001, 0.6, 0.01, 0.001) == MATCHED  # equivalence outranks a refutation (both are said)
    assert seed_verdict(-0.01, 0.6, 0.2, 0.01) == REFUTED
    assert seed_verdict(0.05, 0.2, 0.3) == NOT_ESTABLISHED
    assert seed_verdict(0.05, float("nan"), float("nan"), float("nan")) == NOT_ESTABLISHED
    assert seed_verdict(0.05, 0.03, 0.9, significance=0.01) == NOT_ESTABLISHED
    # the raw TOST p may pass; only the adjusted one counts: the caller passes Holm-adjusted p's
    assert seed_verdict(0.0, 1.0, 0.06, 0.5) == NOT_ESTABLISHED
    # at the ceiling a difference still stands; equivalence and refutation are forced, so untestable
    assert seed_verdict(0.05, 0.01, 0.9, ceiling=True) == BEAT
    assert seed_verdict(-0.001, 0.6, 0.01, 0.001, ceiling=True) == UNTESTABLE


def test_seed_bootstrap_interval_two_seeds_hand_value():
    """Seeds (0, 1): a resampled mean is 0, 0.5 or 1 with probability 1/4, 1/2, 1/4, so the 95% interval is [0, 1]
    and the 40% interval (quantiles 0.3, 0.7) is [0.5, 0.5]."""
    wide = seed_bootstrap_interval([0.0, 1.0], 0.95, n_boot=20_000)
    assert (wide.mean, wide.low, wide.high, wide.n) == (0.5, 0.0, 1.0, 2)
    narrow = seed_bootstrap_interval([0.0, 1.0], 0.40, n_boot=20_000)
    assert (narrow.low, narrow.high) == (0.5, 0.5)


def test_seed_bootstrap_interval_stays_in_the_range_of_the_seeds():
    values = [0.02, 0.05, 0.97, 0.99, 0.01]
    iv = seed_bootstrap_interval(values, 0.95)
    t = mean_t_interval(values, 0.95)
    assert t.low < 0.0  # the t-interval leaves [0, 1] here
    assert min(values) <= iv.low < iv.mean < iv.high <= max(values)
    assert seed_bootstrap_interval(values, 0.95) == iv  # seeded: the same interval every time
    assert seed_bootstrap_interval([0.3], 0.95) == Interval(0.3, 0.3, 0.3, 1)
