"""Our grader on other graders' own test suites (tests/rewards/data/outside/README.md): no false positive, and every
case where ours differs from theirs reviewed in disagreements.jsonl, so a new disagreement (or a fixed one whose
review was not removed) fails here. 10 s on an idle machine (342 cases, most settled without math-verify)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks.outside_suites import OUTSIDE, SUITES, grade_cases, load_cases, load_reviews, print_outside
from hacrl_exp.rewards import Grader

AGREEMENT = {"math-verify": 227, "hendrycks-math": 14, "nemo-skills": 58}
"""Cases where ours and theirs agree, as measured (docs/evaluation.md, "Outside suites"); never fewer."""


@pytest.fixture(scope="module")
def outcomes():
    with Grader(timeout_s=5.0, workers=2) as grader:
        found = grade_cases(grader, load_cases(), load_reviews())
    print_outside(found)  # shown with `pytest -s` and on failure: the table and every disagreement
    return found


def test_no_false_positive(outcomes):
    assert [o.case["id"] for o in outcomes if o.false_positive] == []


def test_every_disagreement_is_reviewed_and_every_review_is_current(outcomes):
    unreviewed = [f"{o.case['id']}: ours {o.ours} ({o.reason}), theirs {o.case['expected']}" for o in outcomes]
    unreviewed = [line for o, line in zip(outcomes, unreviewed) if not o.agrees and o.review is None]
    assert unreviewed == [], "classify each in tests/rewards/data/outside/disagreements.jsonl (or fix the grader)"
    stale = [o.case["id"] for o in outcomes if o.agrees and o.review is not None]
    assert stale == [], "these now agree: drop their entries from disagreements.jsonl and update the docs' table"
    assert set(load_reviews()) <= {o.case["id"] for o in outcomes}, "a review names no case"


def test_value_policy_reads_no_form_without_a_question(outcomes):
    """The cases give no question, so grader forms=value finds no form to skip: the same verdict on every case."""
    assert [o.case["id"] for o in outcomes if o.ours_value != o.ours] == []


def test_agreement_does_not_regress(outcomes):
    agree = {suite: sum(o.agrees for o in outcomes if o.case["suite"] == suite) for suite in SUITES}
    assert all(agree[suite] >= floor for suite, floor in AGREEMENT.items()), agree


def test_cases_carry_their_source():
    readme = (OUTSIDE / "README.md").read_text(encoding="utf-8")
    for case in load_cases():
        assert {"their_gold", "their_answer", "expected", "gold", "file", "test", "line"} <= set(case), case["id"]
        assert ("answer" in case) != ("response" in case), case["id"]
        assert case["suite"] in readme


@pytest.mark.skipif(not os.environ.get("HACRL_MIRRORS"), reason="HACRL_MIRRORS (a folder of owner+name/repo mirrors)")
def test_regenerating_from_the_mirrors_gives_the_same_cases(tmp_path, monkeypatch):
    from benchmarks import outside_cases

    monkeypatch.setattr(outside_cases, "OUT", tmp_path)
    outside_cases.regenerate(Path(os.environ["HACRL_MIRRORS"]))
    for suite in SUITES:
        fresh = (tmp_path / f"{suite}.jsonl").read_text(encoding="utf-8")
        assert [json.loads(line) for line in fresh.splitlines()] == [c for c in load_cases() if c["suite"] == suite]
