"""Power of the report's rule by simulation (hacrl_exp.report.power) against exact counts and the issue's numbers."""

import math

import numpy as np
import pytest

from hacrl_exp.report.power import EXACT_MAX_SEEDS, MAX_SEEDS, RulePower, saddlepoint_sign_flip_p, seeds_for_power
from hacrl_exp.report.stats import sign_flip_p

ISSUE_GPT2_HACPO_VS_GSPO_X2 = [0.0675, 0.0875, -0.0125, 0.02, -0.0025, 0.075, 0.015, 0.03, -0.0075, 0.04]
"""gpt2_bpe HACPO − GSPO×2 per seed in the 10-seed Table-1 grid (reports/paper_table1_tiny_10seeds, 12 main tests)."""


def test_no_grid_can_pass_below_its_smallest_p():
    # Holm's first step over m = 24 tests at 0.05: threshold 0.00208; 2/2^10 = 0.00195 passes, 2/2^9 = 0.0039 not
    power = RulePower(1.0, 0.01, 0.05 / 24, draws=200)
    assert power(9) == 0.0 and power(10) == 1.0  # every simulated grid is all-positive: p = 2/2^n exactly
    assert seeds_for_power(power) == 10
    assert math.isnan(RulePower(0.1, 0.0, 0.05).__call__(5)) and seeds_for_power(RulePower(0.1, math.nan, 0.05)) is None


def test_power_under_the_report_rule_reproduces_the_issue():
    """The issue: "about 13 seeds would settle it" is the unadjusted t-test's n; under the report's own rule (sign-flip,
    Holm over the family's 12 tests) the power at 13 seeds is about 0.40."""
    d = np.array(ISSUE_GPT2_HACPO_VS_GSPO_X2)
    power = RulePower(d.mean(), d.std(ddof=1), 0.05 / 12, draws=2000, seed=0)
    assert power(13) == pytest.approx(0.40, abs=0.04)
    assert power(10) < power(13) < power(20) and power(10) == pytest.approx(0.2, abs=0.04)
    assert 20 <= seeds_for_power(power) <= 26  # not 13


def test_seeds_for_power_is_the_first_n_that_reaches_the_target():
    power = RulePower(0.03, 0.035, 0.05 / 12, draws=400, seed=3)
    n = seeds_for_power(power)
    assert n is not None and power(n) >= 0.8 > power(n - 1)
    assert seeds_for_power(RulePower(0.001, 0.05, 0.05 / 12, draws=200)) is None  # not by MAX_SEEDS
    assert power(MAX_SEEDS) >= power(n)


@pytest.mark.parametrize("n", [EXACT_MAX_SEEDS + 1, 13, 14])
def test_saddlepoint_agrees_with_the_exact_sign_flip_count(n):
    """Beyond the exact range the saddlepoint p decides as the exact count does, at the thresholds Holm uses."""
    rng = np.random.default_rng(n)
    d = 0.8 + rng.standard_normal((150, n))
    exact = np.array([sign_flip_p(row) for row in d])
    approx = saddlepoint_sign_flip_p(d)
    for threshold in (0.05 / 24, 0.05 / 12, 0.01):
        assert np.mean((exact < threshold) != (approx < threshold)) <= 0.05
    small = exact < 0.05
    # within a factor 2.2 in the tail (the largest misses are the atoms next to the all-one-sign extreme)
    assert np.all(np.abs(np.log(approx[small] / exact[small])) < math.log(2.2))
    assert saddlepoint_sign_flip_p(np.full((1, n), 0.3))[0] == pytest.approx(2 / 2**n)  # all one sign: exact
