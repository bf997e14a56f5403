"""Metric definitions on hand-computed fixtures: pass@k, avg@k, best@k, maj@k (ties), and the bootstrap CI."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hacrl_exp.evaluation.metrics import (
    CORRECT,
    Metric,
    bootstrap_ci,
    majority_score,
    parse_metric,
    pass_at_k,
    problem_score,
)


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (5, 2, 1, 0.4),  # pass@1 = c/n
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (5, 2, 4, 1.0),  # n - c < k: every 4-subset holds a right one
        (10, 3, 4, 1 - 35 / 210),  # 1 - C(7,4)/C(10,4) = 5/6
        (30, 0, 30, 0.0),
        (30, 1, 30, 1.0),
        (1, 1, 1, 1.0),
    ],
)
def test_pass_at_k_hand_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_binomials_and_is_stable():
    for n in range(1, 25):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)
    assert 0.0 < pass_at_k(2000, 1, 1) < 1e-3  # products, no huge binomials


@pytest.mark.parametrize("n, c, k", [(5, 6, 1), (5, 2, 0), (5, 2, 6), (3, -1, 1)])
def test_pass_at_k_rejects_bad_arguments(n, c, k):
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(n, c, k)


@pytest.mark.parametrize(
    "votes, expected",
    [
        ([CORRECT, "a", "a", CORRECT], 0.5),  # two tied groups, one right: half the credit
        (["a", "a", CORRECT], 0.0),
        (["a", "b", CORRECT], 1 / 3),  # three-way tie
        ([CORRECT, None, None], 1.0),  # no answer abstains
        ([None, None], 0.0),
        (["a", CORRECT, CORRECT, "b", "b"], 0.5),
        ([CORRECT, CORRECT, "a"], 1.0),
    ],
)
def test_majority_ties_share_credit(votes, expected):
    assert majority_score(votes) == pytest.approx(expected)


def test_problem_scores_use_first_k_or_all_n():
    rewards = [0.0, 1.0, 0.0, 1.0]
    votes = [None, CORRECT, "x", CORRECT]
    assert problem_score(Metric("accuracy"), rewards, votes) == 0.0  # first sample only
    assert problem_score(Metric("avg", 2), rewards, votes) == 0.5
    assert problem_score(Metric("avg", 4), rewards, votes) == 0.5
    assert problem_score(Metric("best", 1), rewards, votes) == 0.0
    assert problem_score(Metric("best", 2), rewards, votes) == 1.0  # any of the first 2
    assert problem_score(Metric("pass", 1), rewards, votes) == pytest.approx(0.5)  # unbiased, over all 4
    assert problem_score(Metric("pass", 2), rewards, votes) == pytest.approx(1 - 1 / 6)
    assert problem_score(Metric("maj", 3), rewards, votes) == 0.5  # CORRECT vs 'x', one vote each
    assert problem_score(Metric("maj", 4), rewards, votes) == 1.0
    with pytest.raises(ValueError, match="needs at least 8 samples"):
        problem_score(Metric("best", 8), rewards, votes)


def test_parse_metric_forms():
    assert parse_metric("accuracy") == Metric("accuracy", 1)
    assert parse_metric("pass@8") == parse_metric("pass_at_8") == Metric("pass", 8)
    assert parse_metric("best@30").name == "best_at_30"
    for bad in ("pass@0", "top@3", "pass", "maj@x"):
        with pytest.raises(ValueError, match="not a metric"):
            parse_metric(bad)


def test_bootstrap_is_seeded_and_brackets_the_mean():
    scores = np.random.default_rng(3).integers(0, 2, size=(200, 2)).astype(float)
    low, high = bootstrap_ci(scores, n_boot=500, seed=7)
    low2, high2 = bootstrap_ci(scores, n_boot=500, seed=7)
    assert np.array_equal(low, low2) and np.array_equal(high, high2)
    other = bootstrap_ci(scores, n_boot=500, seed=8)
    assert not np.array_equal(low, other[0]) or not np.array_equal(high, other[1])
    mean = scores.mean(axis=0)
    assert np.all(low <= mean) and np.all(mean <= high)
    # about ±1.96·sqrt(p(1-p)/n) = ±0.069 for p ≈ 0.5, n = 200
    assert np.all((high - low) > 0.10) and np.all((high - low) < 0.18)


def test_bootstrap_degenerate_cases():
    low, high = bootstrap_ci(np.array([1.0]), n_boot=100)
    assert low.tolist() == high.tolist() == [1.0]
    low, high = bootstrap_ci(np.ones(50), n_boot=100)
    assert low.tolist() == high.tolist() == [1.0]
    low, high = bootstrap_ci(np.array([0.0, 1.0]), n_boot=0)
    assert low.tolist() == high.tolist() == [0.5]
