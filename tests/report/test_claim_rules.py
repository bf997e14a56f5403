"""Issue 38's rules: one test family at its nominal type-I error on bounded, tied accuracies; the ceiling rule; the
exact outlier bound; collapses below a run's own start; finals near an edge; one rounding; the detectable effect."""

import math

import pandas as pd
import pytest

from hacrl_exp.report.claims import judge
from hacrl_exp.report.compare import seed_comparison
from hacrl_exp.report.power import minimum_detectable_effect, type_one_errors
from hacrl_exp.report.rules import EDGE, Stated, untestable
from hacrl_exp.report.seeds import BELOW_START, as_fraction, edge_finals, outlying_seeds
from hacrl_exp.report.stats import MATCHED, REFUTED, UNTESTABLE, PairedTest
from hacrl_exp.report.tables import BASE
from hacrl_exp.report.text import num, signed

ALPHA, DRAWS = 0.05, 2000
SLACK = 3 * math.sqrt(ALPHA * (1 - ALPHA) / DRAWS)  # 3 Monte Carlo SEs: 0.0146


@pytest.mark.parametrize(
    ("base", "problems", "spread"),
    [(0.35, 200, 0.03), (0.80, 400, 0.02), (0.93, 200, 0.01), (0.945, 400, 0.005)],
)
def test_each_sign_flip_test_holds_its_level_on_bounded_tied_accuracies(base, problems, spread):
    """Accuracies in steps of 1/problems, paired by seed, near the ceiling too (B's room ≥ δ + EDGE: testable); each
    test at its null boundary (μ = 0, +m, +δ) rejects in at most α (+ Monte Carlo slack) of 2000 grids of 10 seeds."""
    rates = type_one_errors(base, problems, seeds=10, effect=0.0333, draws=DRAWS, seed=0, seed_sd=spread, run_sd=spread)
    for test in ("difference, sign-flip", "equivalence, sign-flip", "refutation, sign-flip"):
        assert rates[test] <= ALPHA + SLACK, (test, rates[test])
    assert untestable(base, Stated(0.0333, ""), None) is False  # the regime is one the rule lets be tested


def test_ceiling_rule_on_hand_values():
    effect, margin = Stated(0.032, "paper"), Stated(0.016, "half")
    # the gap grid's opt_char GSPO ends at 0.9835: room 0.0165 < 0.032 + 0.02 → untestable
    assert untestable(0.9835, effect, margin)
    assert not untestable(0.948, effect, margin)  # room 0.052 = 0.032 + 0.02 exactly: testable (not below)
    assert untestable(0.9485, effect, margin)  # room 0.0515 < 0.052
    # a margin alone (a baselines pair) needs room on both sides: m + EDGE = 0.036
    assert untestable(0.97, None, margin) and untestable(0.03, None, margin) and not untestable(0.5, None, margin)
    assert untestable(0.03, Stated(-0.02, ""), None) and not untestable(0.97, Stated(-0.02, ""), None)  # δ < 0: floor
    assert not untestable(math.nan, effect, margin) and not untestable(0.99, None, None)  # unknown, or nothing tested


def _comparison(d, mean_b, a="HACPO", b="GSPO×2"):
    paired = PairedTest(0.0, 0.0, 0.0, 1.0, 0, 0, 1.0, 0, 0)
    c = seed_comparison("opt_char", a, b, "mean", d, paired)
    from dataclasses import replace

    from hacrl_exp.report.compare import adjust

    (c,) = adjust([replace(c, means=(mean_b + sum(d) / len(d), mean_b))])
    return c


def test_ceiling_turns_a_forced_refutation_into_untestable_in_the_verdict_and_the_claim():
    d = (-0.0275, -0.005, -0.01, -0.035, 0.005, 0, 0.0125, -0.01, -0.005, -0.0125)  # the opt_char H1
    near = _comparison(d, 0.9835)
    assert near.verdict == UNTESTABLE and judge(near) == UNTESTABLE and not near.refuted
    room = _comparison(d, 0.60)  # the same differences with room: refuted (sign-flip, p = 1/1024 before Holm)
    assert room.verdict == REFUTED and judge(room) == REFUTED and room.refuted
    same = _comparison((0.0025, -0.0025, 0.0, 0.005, -0.005, 0.0025, -0.0025, 0.0, 0.0025, -0.0025), 0.60)
    assert same.verdict == MATCHED  # within ±0.0167, 10 seeds
    assert _comparison(same.per_seed, 0.99).verdict == UNTESTABLE


def final_frame(rows):
    return pd.DataFrame(rows, columns=["agent", "method", "seed", "value"]).assign(column="mean")


def test_outlier_on_the_exact_bound_is_not_flagged():
    """Table-1 opt_char Naive against GSPO (reports/paper_table1_tiny_10seeds, 400 problems): seed 9 lies exactly on
    the bound, |0.0625 − 0.02125| = 0.04125 = 3 · MAD = 33/800; the float rule flagged it through a 5.6e-17 excess."""
    gspo = (0.5575, 0.5325, 0.6475, 0.5325, 0.635, 0.625, 0.6224999999999999, 0.6875, 0.5625, 0.495)
    naive = (0.5275000000000001, 0.5575, 0.6825, 0.58, 0.635, 0.6475, 0.6425, 0.6950000000000001, 0.5825, 0.5575)
    d = [n - g for n, g in zip(naive, gspo)]
    med = sorted(d)[4:6]
    assert abs(d[9] - sum(med) / 2) - 3 * 0.01375 > 0  # the float excess the old rule tripped on
    rows = [("opt_char", "GSPO", s, g) for s, g in enumerate(gspo)] + [
        ("opt_char", "Naive", s, n) for s, n in enumerate(naive)
    ]
    flags = outlying_seeds(final_frame(rows), ["GSPO", "Naive"], {"opt_char": 400})
    assert list(flags["seed"]) == [0]  # seed 0 (−0.03, 0.05125 from the median) is beyond; seed 9 is on it
    assert as_fraction(flags["bound"].iloc[0]) == as_fraction(33 / 800)
    # gpt2_bpe Naive − GSPO of the same grid: seed 3 at 9/200 lies on median 3/40 − bound 3/100 (3 · 0.01 as a float
    # is 0.030000000000000002 < 3/100 would flag it: the factor 3 must be exact too)
    d = (0.0775, 0.0975, 0.0775, 0.045, 0.085, 0.0625, 0.0725, 0.07, 0.065, 0.09)
    rows = [("g", "GSPO", s, 0.5) for s in range(10)] + [("g", "Naive", s, 0.5 + x) for s, x in enumerate(d)]
    assert outlying_seeds(final_frame(rows), ["GSPO", "Naive"], {"g": 400}).empty


def test_a_run_below_its_own_start_is_flagged_for_every_method():
    rows = [("a", BASE, s, 0.5) for s in range(5)]
    rows += [("a", "GSPO", s, 0.6) for s in range(5)] + [("a", "GSPO", 5, 0.4)]  # seed 5 has no start: not flagged
    rows += [("a", "HACPO", s, 0.6) for s in range(4)] + [("a", "HACPO", 4, 0.4975)]  # seed 4 ends below 0.5
    flags = outlying_seeds(final_frame(rows), ["GSPO", "HACPO"], {"a": 200})
    below = flags[flags["direction"] == BELOW_START]
    assert list(zip(below["method"], below["seed"])) == [("HACPO", 4)]
    assert below["delta"].iloc[0] == pytest.approx(-0.0025)


def test_finals_within_the_edge_are_flagged():
    rows = [
        ("a", "GSPO", 0, 0.98),
        ("a", "GSPO", 1, 0.9799999999999999),
        ("a", "HACPO", 0, 0.02),
        ("a", "HACPO", 1, 0.5),
    ]
    flags = edge_finals(final_frame(rows), ["GSPO", "HACPO"])
    assert EDGE == 0.02 and list(zip(flags["method"], flags["seed"], flags["side"])) == [
        ("GSPO", 0, "ceiling"), ("GSPO", 1, "ceiling"), ("HACPO", 0, "floor")
    ]  # fmt: skip


def test_one_rounding_rule_for_half_way_means():
    assert num(0.34750000000000003) == num(0.34749999999999998) == num(139 / 400) == "0.348"
    assert signed(-0.0015) == "-0.002" and signed(0.0015) == "+0.002" and signed(-1e-18) == "+0.000"
    assert num(0.12345, 4) == "0.1235" and num(float("nan")) == "n/a"


def test_minimum_detectable_effect():
    # no grid of 5 seeds passes at 0.05/18 (2/32 ≥ 0.0028): inf; 10 seeds: a few SDs; more tests, larger effect
    assert minimum_detectable_effect(0.05, 5, 0.05 / 18) == math.inf
    one, many = minimum_detectable_effect(0.05, 10, 0.05), minimum_detectable_effect(0.05, 10, 0.05 / 18)
    assert 0.0 < one < many < 0.15 and math.isnan(minimum_detectable_effect(0.0, 10, 0.05))


def test_the_ceiling_verdict_is_named_in_the_sentences_and_the_headline():
    from hacrl_exp.report.headline import headline_sentence
    from hacrl_exp.report.text import verdict_phrase

    d = (-0.0275, -0.005, -0.01, -0.035, 0.005, 0, 0.0125, -0.01, -0.005, -0.0125)
    c = _comparison(d, 0.985)
    assert "untestable (ceiling): GSPO×2 ends at 0.985" in verdict_phrase(c)
    sentence = headline_sentence(c, pd.DataFrame(columns=["agent", "method"]))
    assert sentence.startswith("⊤ **opt_char**: HACPO vs GSPO×2: untestable (ceiling)") and "room 0.015" in sentence


def test_the_partner_rows_control_is_a_claim_and_only_hacpo_minus_a_mechanism_an_ablation():
    """HACPO vs its shuffled-partner control tests the partner's signal, a claim; it was filed as an ablation because
    its label starts with 'HACPO ' (a partial grid's headline left it out)."""
    from hacrl_exp.report.rules import ABLATIONS, BASELINES, CLAIMS, DYNAMIC, SHUFFLED, family_of

    assert family_of("HACPO", SHUFFLED) == family_of("HACPO", DYNAMIC) == family_of("HACPO", "GSPO×2") == CLAIMS
    assert family_of("HACPO", "HACPO −ω") == family_of("HACPO", "HACPO −Adv −Clip") == ABLATIONS
    assert family_of(SHUFFLED, "GSPO") == family_of("Naive", "GSPO") == BASELINES
