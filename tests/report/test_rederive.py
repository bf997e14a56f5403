"""hacrl_exp.report.rederive: a published comparisons.csv judged again by the current rules.

On hand values (a made-up comparisons.csv whose p-values are counted by hand) and on the 10-seed synthetic report,
whose own verdicts, adjusted p's, power and outlying seeds the rederivation must give back from its CSV alone.
"""

import math

import pandas as pd
import pytest

from hacrl_exp.errors import EXIT_BAD_INPUT
from hacrl_exp.report import rederive as rd
from hacrl_exp.report.seeds import outlying_seeds, problems_per_agent
from hacrl_exp.report.stats import BEAT, MATCHED, NOT_ESTABLISHED, REFUTED, refute_p, tost_p
from hacrl_exp.report.tables import finals, methods_in
from tests.report.conftest import SETTINGS
from tests.report.synthetic import STRONG_HACPO_OVER_GSPO_X2, TEN_SEEDS

NOISE = 1.11022e-16
CLIP = (0.01, 0.02, NOISE, 0.03, 0.01, 0.02, 0.01, 0.04, 0.02, 0.01)
"""HACPO − HACPO −Clip: 9 ahead and one float-noise tie. Sign-flip: flipping the tie keeps |Σ|, so 4 of the 1024
patterns reach it: p = 4/1024."""
STEPWISE = (0.01,) * 9 + (-0.01,)
"""HACPO − HACPO −Stepwise: |Σ ε d| = 0.01 · |#plus − #minus| ≥ 0.08 for 0, 1, 9 or 10 minus signs:
p = (1 + 10 + 10 + 1)/1024 = 22/1024."""


def csv_row(a, b, per_seed, verdict, p_holm, p_tost=math.nan, ahead=0):
    return {"agent": "opt_char", "a": a, "b": b, "column": "mean", "family": "old", "delta": 0.0, "ci_low": 0.0,
            "ci_high": 0.0, "p_bootstrap": 1.0, "p_mcnemar": 1.0, "a_only_right": 0, "b_only_right": 0,
            "per_seed": " ".join(f"{d:.6g}" for d in per_seed), "p_holm": p_holm, "equivalence_margin": 0.02,
            "p_tost": p_tost, "seeds_ahead": ahead, "seeds_needed": 8, "verdict": verdict}  # fmt: skip


@pytest.fixture()
def hand(tmp_path):
    """A made-up report folder: two ablations without a paper effect, and the issue's opt_char H1 (old verdicts as
    the old code wrote them)."""
    (tmp_path / "tables").mkdir()
    rows = [
        csv_row("HACPO", "HACPO −Clip", CLIP, NOT_ESTABLISHED, 0.078, ahead=10),
        csv_row("HACPO", "HACPO −Stepwise", STEPWISE, NOT_ESTABLISHED, 0.2, ahead=9),
        csv_row("HACPO", "GSPO×2", STRONG_HACPO_OVER_GSPO_X2, MATCHED, 0.656, p_tost=0.017, ahead=2),
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "tables" / "comparisons.csv", index=False)
    pd.DataFrame(
        [{"hypothesis": "H1", "agent": "opt_char", "a": "HACPO", "b": "GSPO×2", "verdict": NOT_ESTABLISHED}]
    ).to_csv(tmp_path / "tables" / "hypotheses.csv", index=False)
    return tmp_path


def by_pair(found):
    return {(c.a, c.b): c for c in found}


def test_hand_values_holm_per_family_ties_and_refuted(hand):
    frame, hypotheses = rd.read_comparisons(hand)
    found = by_pair(rd.rederive(frame, power_draws=200))
    clip, stepwise, h1 = found["HACPO", "HACPO −Clip"], found["HACPO", "HACPO −Stepwise"], found["HACPO", "GSPO×2"]
    # ablations family: only the two sign-flip tests (no paper effect: no margin, no δ); Holm with m = 2
    assert clip.p_sign_flip == pytest.approx(4 / 1024) and stepwise.p_sign_flip == pytest.approx(22 / 1024)
    assert clip.tests == stepwise.tests == 2
    assert clip.p_holm == pytest.approx(2 * 4 / 1024) and stepwise.p_holm == pytest.approx(max(8, 22) / 1024)
    assert clip.verdict == stepwise.verdict == BEAT
    assert clip.counts == (9, 1, 0)  # the float-noise difference is a tie, not a seed ahead
    # claims family, one comparison: sign-flip, TOST within ±0.0333/2 and Δ ≥ +0.0333, Holm over those 3
    d = STRONG_HACPO_OVER_GSPO_X2
    # one test family (issue 38): all three are sign-flip tests; no seed reaches +0.0333, so refute p = 1/1024 exactly;
    # TOST's upper side: subsets with mean ≥ +0.0167 are ∅ and none else… so its lower side (mean ≤ −0.0167) decides
    tost, refute = tost_p(d, 0.03333333 / 2), refute_p(d, 0.03333333)
    assert refute == pytest.approx(1 / 1024) and tost == pytest.approx(59 / 1024)
    assert h1.tests == 3 and h1.counts == (2, 1, 7)
    assert h1.p_refute_holm == pytest.approx(3 / 1024) and h1.p_tost_holm == pytest.approx(2 * 59 / 1024)
    assert h1.p_tost_holm > 0.05
    assert h1.verdict == REFUTED and h1.upper < 0.0333
    text = rd.rederived_markdown(hand, "cmd", list(found.values()), frame, hypotheses, 400)
    h1_line = next(x for x in text.splitlines() if x.startswith("| H1 | opt_char |"))
    assert "**matched → refuted**" in h1_line and "**not established → refuted**" in h1_line
    assert "old unadjusted 0.017" in h1_line and "refuted, a verdict the old rules lacked" in h1_line
    clip_line = next(x for x in text.splitlines() if x.startswith("| H3 Clip | opt_char |"))
    assert "**not established → beat**" in clip_line and "| 10 | 9 / 1 / 0 |" in clip_line


def test_bad_folder_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        rd.main([str(tmp_path)])
    assert stop.value.code == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "comparisons.csv" in err and "Traceback" not in err


def test_the_report_is_reproduced_from_its_csv(ten):
    """The 10-seed synthetic report's own comparisons and claims, from its tables/*.csv alone."""
    frame, hypotheses = rd.read_comparisons(ten.folder)
    again = rd.rederive(frame, power_draws=SETTINGS["power_draws"], seed=0, final=rd.accuracies(ten.folder))
    assert len(again) == len(ten.comparisons)
    for old, new in zip(ten.comparisons, again):
        assert (old.agent, old.a, old.b, old.column, old.family) == (new.agent, new.a, new.b, new.column, new.family)
        assert (new.verdict, new.counts, new.tests, new.refuted) == (old.verdict, old.counts, old.tests, old.refuted)
        for name in ("p_sign_flip", "p_holm", "p_tost_holm", "p_refute_holm", "upper"):
            assert getattr(new, name) == pytest.approx(getattr(old, name), rel=1e-6, nan_ok=True), name
        assert new.power == pytest.approx(old.power, nan_ok=True) and new.seeds_for_power == old.seeds_for_power
    verdicts = {c.verdict for c in again}
    assert {BEAT, REFUTED} <= verdicts  # the synthetic grid reaches verdicts, so the check has teeth
    text = rd.rederived_markdown(ten.folder, "cmd", again, frame, hypotheses, None, final=rd.accuracies(ten.folder))
    claims = [x for x in text.split("## The claims, old and new")[1].splitlines() if x.startswith("| H")]
    assert claims and not any("**" in x for x in claims)  # same rules, same verdicts: nothing marked as changed


def test_outlying_seeds_from_the_csv_match_the_reports(ten):
    frame, _ = rd.read_comparisons(ten.folder)
    again = rd.rederive(frame, power_draws=0)
    problems = problems_per_agent(ten.data)
    # from per_seed_accuracy.csv: the report's own flags, collapses below the start included
    final = rd.accuracies(ten.folder)
    exact = outlying_seeds(final, rd.methods_of(again), problems)
    reported = outlying_seeds(finals(ten.data), methods_in(ten.data), problems)
    key3 = ["agent", "method", "seed", "direction"]
    assert set(map(tuple, exact[key3].to_numpy())) == set(map(tuple, reported[key3].to_numpy()))
    reported = reported[reported["direction"] != "below its start"]  # the differences alone have no starts
    ours = outlying_seeds(rd.over_gspo(again, list(TEN_SEEDS)), rd.methods_of(again), problems)
    theirs = reported
    key = ["agent", "method", "seed"]
    assert not theirs.empty and ("strong", "HACPO −ω", 8) in set(map(tuple, theirs[key].to_numpy()))
    rows = {tuple(r[:3]): r for r in [*ours.itertuples(index=False), *theirs.itertuples(index=False)]}
    differ = set(map(tuple, ours[key].to_numpy())) ^ set(map(tuple, theirs[key].to_numpy()))
    # the CSV keeps 6 significant digits, so only a seed at the bound itself (up to float noise) may differ
    assert all(abs(abs(rows[k].delta - rows[k].median) - rows[k].bound) < 1e-9 for k in differ), differ
    merged = ours.merge(theirs, on=key)
    assert len(merged) >= 3 and merged["delta_x"].to_numpy() == pytest.approx(merged["delta_y"].to_numpy(), abs=1e-6)
