"""The report's inference and layout on hand-made runs (tests/report/synthetic.py): no training, no MLflow.

`built` is the 3-seed synthetic report; `ten` the 10-seed one (tests/report/conftest.py), where the rules reach
verdicts: the strong agent's HACPO vs GSPO×2 is the issue's refuted H1, the weak agent's HACPO beat GSPO and fell
short of Naive, and the strong agent's HACPO −ω collapses at seed 8. Figures, regime, costs and links:
tests/report/test_layout.py.
"""

import math

import pandas as pd
import pytest

from hacrl_exp.config.report_schema import validate_report
from hacrl_exp.report.stats import BEAT, FELL_SHORT, MATCHED, NOT_ESTABLISHED, REFUTED, holm, one_sided_upper
from hacrl_exp.report.text import signed
from tests.report.conftest import SETTINGS
from tests.report.synthetic import (
    STRONG_HACPO_OVER_GSPO_X2,
    make_data,
    per_seed_differences,
)


def find(report, agent, a, b, column="mean"):
    (found,) = [c for c in report.comparisons if (c.agent, c.a, c.b, c.column) == (agent, a, b, column)]
    return found


def line_starting(report, prefix: str) -> str:
    return next(x for x in report.markdown.splitlines() if x.startswith(prefix))


def t2_cdf(x: float) -> float:
    """Student t with 2 degrees of freedom: 1/2 + x / (2 · sqrt(2 + x²))."""
    return 0.5 + x / (2.0 * math.sqrt(2.0 + x * x))


def test_seeds_disagree_per_problem_significant_but_not_established(built):
    c = find(built, "strong", "HACPO", "GSPO×2")
    assert c.per_seed == pytest.approx(per_seed_differences("strong", "HACPO", "GSPO×2"))  # +0.15, +0.15, −0.05
    assert c.runs_verdict == BEAT and c.paired.p_bootstrap < 0.05 and c.paired.low > 0  # these runs: clear
    assert c.p_sign_flip == pytest.approx(4 / 8)  # across seeds: |±.15 ±.15 ±.05| ≥ .25 for 4 of 8 sign patterns
    assert not c.seeds.excludes_zero() and c.verdict == NOT_ESTABLISHED
    line = line_starting(built, "- ○ HACPO vs GSPO×2 for strong")
    assert "not established (neither a difference across seeds, nor equivalence within ±0.017, nor a refutation of " \
           "+0.033)" in line and "holds the trained runs fixed" in line  # fmt: skip
    h1 = line_starting(built, "| H1 | HACPO > GSPO×2 with half the rollouts | strong |")
    assert h1.split("|")[-2].strip() == "not established"


def test_holm_runs_over_every_test_of_the_family_tost_included(built):
    """Claims family: HACPO vs GSPO, GSPO (update-matched), GSPO×2, Naive × 2 agents × (sign-flip, TOST,
    refutation) = 24 tests, adjusted together; a raw TOST p below 0.05 no longer makes 'matched'."""
    claims = [c for c in built.comparisons if c.family == "claims" and c.column == "mean"]
    assert len(claims) == 8 and {c.tests for c in claims} == {24}
    raw = [p for c in claims for p in (c.p_sign_flip, c.p_tost, c.p_refute)]
    adjusted = holm(raw)
    assert [p for c in claims for p in (c.p_holm, c.p_tost_holm, c.p_refute_holm)] == pytest.approx(adjusted)
    # weak HACPO vs GSPO×2: d = (0, −0.01, +0.01), margin = half the paper's +0.0333; TOST by two one-sided sign-flip
    # tests: no non-empty subset mean reaches ±0.0167, so each side is 1/8 (the smallest p of 3 seeds)
    c = find(built, "weak", "HACPO", "GSPO×2")
    margin = 0.2 / 6 / 2
    assert c.margin.value == pytest.approx(margin) and c.p_tost == pytest.approx(1 / 8)
    assert c.p_tost_holm > 0.5 and c.verdict == NOT_ESTABLISHED
    u = find(built, "weak", "HACPO", "GSPO")  # 3 seeds: an exact one-sided test cannot go below 1/8
    assert u.p_tost >= 1 / 8 and u.verdict == NOT_ESTABLISHED
    # baselines and ablations are families of their own
    assert {c.tests for c in built.comparisons if c.family == "ablations" and c.column == "mean"} == {6}


def test_caveat_when_the_seed_interval_excludes_zero_but_holm_does_not_pass(built):
    # ablation family = HACPO vs HACPO −ω for strong (d = .05, .04, .05: all positive, p = 2/8) and weak
    # (d = .01, .02, −.01: 3 of 4 patterns with ε1 = + reach |.02|, p = 6/8), each with a TOST and a refutation
    strong, weak = find(built, "strong", "HACPO", "HACPO −ω"), find(built, "weak", "HACPO", "HACPO −ω")
    assert (strong.p_sign_flip, weak.p_sign_flip) == pytest.approx((0.25, 0.75))
    assert strong.seeds.excludes_zero() and strong.verdict == NOT_ESTABLISHED
    line = line_starting(built, "- ○ HACPO vs HACPO −ω for strong")
    assert f"t-interval excludes 0 (HACPO above HACPO −ω), but the Holm-adjusted sign-flip p = {strong.p_holm:.3f}" \
           in line  # fmt: skip
    assert "With 3 seeds no sign-flip p can be below 0.250 (2/2^n), and Holm over the 6 tests of its family" in line


def test_caveat_applies_in_the_other_direction():
    from hacrl_exp.report.compare import Comparison
    from hacrl_exp.report.stats import Interval, PairedTest
    from hacrl_exp.report.text import caveats

    below = Comparison(
        "a", "HACPO", "HACPO −ω", "mean", Interval(-0.04, -0.06, -0.02, 3),
        PairedTest(-0.04, -0.06, -0.02, 0.001, 1, 20, 0.001, 1200, 400), (-0.04, -0.05, -0.03), "ablations",
        p_sign_flip=0.25, p_holm=0.5, tests=2,
    )  # fmt: skip
    text = " ".join(caveats(below, 0.95))
    assert "excludes 0 (HACPO below HACPO −ω)" in text and "HACPO was below HACPO −ω" in text


def test_refuted_when_the_one_sided_bound_excludes_the_papers_gain(ten):
    """The issue's opt_char case: HACPO behind GSPO×2 in 7 of 10 seeds (1 tie), the paper's +0.033 refuted."""
    c = find(ten, "strong", "HACPO", "GSPO×2")
    assert c.per_seed == pytest.approx(STRONG_HACPO_OVER_GSPO_X2, abs=1e-9)
    assert c.counts == (2, 1, 7)
    assert c.effect.value == pytest.approx(0.2 / 6) and "Table 1 HACPO − GSPO×2" in c.effect.reason
    assert c.upper == pytest.approx(one_sided_upper(STRONG_HACPO_OVER_GSPO_X2, 0.05), abs=1e-9) and c.upper < 0.0333
    assert c.p_refute_holm < 0.05 <= c.p_holm and c.verdict == REFUTED and c.refuted
    head = (ten.folder / "headline.md").read_text()
    sentence = next(x for x in head.splitlines() if x.startswith("- ✗ **strong**: HACPO vs GSPO×2"))
    assert f"the hypothesised +0.033 is refuted (one-sided 95% upper bound {signed(c.upper)} < +0.033" in sentence
    assert "HACPO behind in 7 of 10 seeds, ahead in 2, tied in 1" in sentence and "matched" not in sentence
    row = line_starting(ten, "| H1 | HACPO > GSPO×2 with half the rollouts | strong |")
    assert row.split("|")[-2].strip() == "refuted" and f"| {signed(c.upper)} |" in row


def test_beat_and_fell_short_pass_holm_with_ten_seeds(ten):
    """Weak agent: HACPO ahead of GSPO at all 10 seeds (sign-flip p = 2/2^10) and behind Naive at all 10."""
    beat, short = find(ten, "weak", "HACPO", "GSPO"), find(ten, "weak", "HACPO", "Naive")
    assert beat.p_sign_flip == pytest.approx(2 / 1024) and short.p_sign_flip == pytest.approx(2 / 1024)
    assert beat.verdict == BEAT and short.verdict == FELL_SHORT and beat.p_holm < 0.05
    claims = [c for c in ten.comparisons if c.family == "claims" and c.column == "mean"]
    raw = [p for c in claims for p in (c.p_sign_flip, c.p_tost, c.p_refute)]
    assert beat.p_holm == pytest.approx(holm(raw)[3 * claims.index(beat)])
    hypotheses = (ten.folder / "tables" / "hypotheses.csv").read_text()
    assert "H2,HACPO > Naive,weak,HACPO,Naive" in hypotheses and ",contradicted" in hypotheses
    assert "▼ **weak**: HACPO fell short of Naive: " in ten.headline


def test_matched_needs_the_adjusted_tost_and_names_its_margin(ten):
    c = find(ten, "strong", "HACPO", "Naive")  # |Δ| small against half the paper's +0.1007
    assert c.verdict == MATCHED and c.p_tost_holm < 0.05 and c.margin.value == pytest.approx(0.604 / 6 / 2)
    assert c.refuted  # inside ±δ/2 excludes +δ as well, and the sentence says both
    sentence = next(x for x in ten.headline.splitlines() if x.startswith("- ≈ **strong**: HACPO matched Naive"))
    assert "within ±0.050" in sentence and "the hypothesised +0.101 is refuted" in sentence


def test_user_margin_and_effect_replace_the_papers_with_their_reasons(tmp_path):
    config = validate_report({**SETTINGS, "equivalence_margin": 0.02, "margin_reason": "one problem in 50",
                              "hypothesised_effect": 0.05, "effect_reason": "a gain worth a rerun"})  # fmt: skip
    from hacrl_exp.report.build import _compute
    from hacrl_exp.report.render import margins_markdown

    found = _compute(config, make_data(), tmp_path).found
    (c,) = [c for c in found if (c.agent, c.a, c.b, c.column) == ("weak", "HACPO", "GSPO×2", "mean")]
    # TOST at ±0.02 on (0, −0.01, +0.01): two one-sided sign-flip tests, 1/8 each (no subset mean reaches ±0.02)
    assert c.p_tost == pytest.approx(1 / 8)
    assert c.effect.value == 0.05 and all(c.effect is None for c in found if c.family == "baselines")  # no claim
    assert "| HACPO vs GSPO×2 | claims | ±0.0200 | set by the user: one problem in 50 | +0.0500 | set by the user: " \
           "a gain worth a rerun |" in margins_markdown(found)  # fmt: skip


def test_paper_effects_and_default_margins():
    from hacrl_exp.report.paper import paper_effect
    from hacrl_exp.report.rules import Rules, effect_for, margin_for

    # Table 1 AVG, mean over 6 agents: HACPO − GSPO×2 = 0.2/6 (the abstract's 3.3%), − GSPO 0.192/6, − Naive 0.604/6
    assert paper_effect("HACPO", "GSPO×2").value == pytest.approx(0.0333333, abs=1e-6)
    assert paper_effect("HACPO", "GSPO").value == pytest.approx(0.032)
    assert paper_effect("HACPO", "Naive").value == pytest.approx(0.604 / 6)
    assert paper_effect("GSPO×2", "GSPO").value == pytest.approx(-0.008 / 6)
    assert paper_effect("HACPO", "HACPO −Adv").value == pytest.approx((0.028 + 0.015) / 2)  # Table 2
    assert paper_effect("HACPO", "HACPO −ω").value == pytest.approx((0.031 + 0.001) / 2)  # Table 3
    assert paper_effect("HACPO", "HACPO −ExpIS").value == pytest.approx((0.034 + 0.036 + 0.004 + 0.008) / 4)
    assert paper_effect("HACPO", "HACPO −Stepwise") is None and paper_effect("HACPO", "HACPO −Clip") is None
    assert paper_effect("HACPO", "GSPO (update-matched)").value == pytest.approx(0.032)
    assert margin_for("HACPO", "GSPO×2", Rules()).value == pytest.approx(0.2 / 12)
    assert margin_for("HACPO", "HACPO −Clip", Rules()) is None
    assert effect_for("GSPO×2", "GSPO", Rules()) is None  # a baseline pair: no claim, no refutation test


def test_margin_and_effect_need_their_reasons():
    from hacrl_exp.errors import ConfigError

    assert validate_report({}).equivalence_margin is None and validate_report({}).hypothesised_effect is None
    assert validate_report({"equivalence_margin": 0.05, "margin_reason": "x"}).equivalence_margin == 0.05
    with pytest.raises(ConfigError, match="equivalence_margin=0.02 needs its reason: add margin_reason="):
        validate_report({"equivalence_margin": 0.02})
    with pytest.raises(ConfigError, match="hypothesised_effect=0.02 needs its reason: add effect_reason="):
        validate_report({"hypothesised_effect": 0.02, "effect_reason": " "})
    with pytest.raises(ConfigError, match="equivalence_margin"):
        validate_report({"equivalence_margin": 0.0, "margin_reason": "x"})


def test_ties_are_counted_as_ties(built):
    c = find(built, "weak", "HACPO", "GSPO×2")  # d = (0, −0.01, +0.01)
    assert c.counts == (1, 1, 1)
    from hacrl_exp.report.text import seeds_phrase

    assert seeds_phrase(c) == "HACPO ahead in 1 of 3 seeds, behind in 1, tied in 1"
    assert "| weak | HACPO vs GSPO×2 | 0.413 | 0.413 | +0.000 | [-0.025, +0.025] | 1 / 1 / 1 |" in built.headline
    from dataclasses import replace

    assert replace(c, per_seed=(5.6e-17, -0.01, 0.01)).counts == (1, 1, 1)  # float noise is a tie, not a win


def test_power_is_the_simulated_power_of_the_report_rule(built, ten):
    from hacrl_exp.report.power import RulePower, seeds_for_power

    c = find(ten, "weak", "HACPO", "GSPO×2")
    power = RulePower(c.seeds.mean, c.sd, 0.05 / c.tests, draws=SETTINGS["power_draws"], seed=0)
    assert c.power == pytest.approx(power(10)) and c.seeds_for_power == seeds_for_power(power)
    assert find(ten, "weak", "HACPO", "GSPO").power > 0.5
    assert all(c.power == 0.0 for c in built.comparisons if c.column == "mean" and c.sd > 0)  # 3 seeds: 2/8 > 0.05/m
    assert "power / 80% at" in built.markdown and "seeds needed" not in built.markdown


def test_collapse_flag_lists_the_seed_and_its_curve(built, ten):
    flags = (ten.folder / "tables" / "outlying_seeds.csv").read_text().splitlines()
    row = next(x for x in flags if x.startswith("strong,HACPO −ω,8,"))
    # d vs GSPO = (0, .02, −.005, 0, .01, .015, .02, −.01, −.12, −.02): median 0, MAD median(|d|) = 0.0125,
    # bound 3 · max(0.0125, 1/400) = 0.0375: only seed 8 (|−0.12| > 0.0375) is flagged for this method
    delta, median, mad, bound = (float(x) for x in row.split(",")[3:7])
    assert (delta, median, mad, bound) == pytest.approx((-0.12, 0.0, 0.0125, 0.0375), abs=1e-6)
    assert row.endswith(",below") and sum(x.startswith("strong,HACPO −ω,") for x in flags) == 1
    assert "![outlying seeds: their curves](plots/outlying_seeds.png)" in ten.markdown
    assert (ten.folder / "plots" / "outlying_seeds.png").stat().st_size > 5000
    small = pd.read_csv(built.folder / "tables" / "outlying_seeds.csv")  # 3 seeds flag no outlier, only collapses
    assert set(small["direction"]) <= {"below its start"}


def test_per_seed_tables(built):
    assert "| strong | HACPO | 0.650 | 0.650 | 0.550 |" in built.markdown  # final accuracy per method × seed
    assert "| strong | base (step 0) | 0.300 | 0.300 | 0.300 |" in built.markdown  # the start per agent × seed
    starts = (built.folder / "tables" / "starts.csv").read_text().splitlines()
    assert starts[0] == "agent,seed,start,warm start accuracy,warm start steps,target"
    assert starts[1].startswith("strong,0,0.3,0.31,300.0")


def test_qualified_problem_ids_when_the_heldout_seed_varies():
    import pandas as pd

    from hacrl_exp.report.load import qualify_problem_ids

    runs = pd.DataFrame({"run_id": ["a", "b"], "heldout_seed": ["0", "1"]})
    problems = pd.DataFrame({"run_id": ["a", "b"], "problem_id": ["eval/add3/0", "eval/add3/0"]})
    assert list(qualify_problem_ids(runs, problems)["problem_id"]) == ["0:eval/add3/0", "1:eval/add3/0"]
    same = runs.assign(heldout_seed=["0", "0"])
    assert list(qualify_problem_ids(same, problems)["problem_id"]) == ["eval/add3/0", "eval/add3/0"]
    unrecorded = runs.assign(heldout_seed=[None, None])
    assert qualify_problem_ids(unrecorded, problems) is problems


def test_a_comparison_with_only_the_difference_test_says_no_difference_was_established(built):
    """No margin and no hypothesised effect (the update-matched GSPO vs GSPO): the one test tried is named."""
    line = line_starting(built, "- ○ GSPO (update-matched) vs GSPO for strong")
    assert "not established (no difference across seeds)" in line
