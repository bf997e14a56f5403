"""Answer extraction (responses, gold solutions, HF fields) and the three graders, with real math-verify workers."""

from __future__ import annotations

import pytest

from hacrl_exp.rewards import Grader, normalize_gold
from hacrl_exp.rewards.extract import (
    after_bar,
    as_interval,
    before_hashes,
    boxed,
    boxed_number,
    hashes,
    hashes_number,
    normalize_number,
    statements,
    whole_text,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1,080", "1080"),
        ("\\$1{,}080.", "1080"),
        ("18 \\text{ dollars}", "18"),
        ("\\text{18}", "18"),
        ("18.00", "18.00"),
        ("-3", "-3"),
        ("25\\%", "25"),
        ("1,2", None),  # a list, not a number
        ("x+1", None),
        ("\\frac{1}{2}", None),
    ],
)
def test_normalize_number(text, expected):
    assert normalize_number(text) == expected


def test_response_extractors():
    assert boxed("so \\boxed{\\frac{1}{2}} and later \\boxed{3}.") == "3"
    assert boxed("no box") is None and boxed("\\boxed{}") is None
    assert boxed_number("The total is \\boxed{\\$1,080}.") == "1080"
    assert boxed_number("\\boxed{x+1}") == "x+1"  # not a number: passed on for math-verify
    assert after_bar("1+5+0=06|605") == "605" and after_bar("605") is None
    assert whole_text(" 605 \n") == "605" and whole_text("  ") is None


def test_gsm8k_fields():
    raw = "She makes 9 * 2 = $<<9*2=18>>18.\n#### 1,080"
    assert hashes(raw) == "1,080" and hashes_number(raw) == "1080"
    assert before_hashes(raw) == "She makes 9 * 2 = $<<9*2=18>>18."
    assert hashes("no marker") is None and before_hashes("no marker") is None


@pytest.mark.parametrize(
    "span, interval",
    [
        ("k<-5", "(-\\infty,-5)"),
        ("x \\geq 3", "[3,\\infty)"),
        ("-1 \\leq k \\leq-\\frac{1}{2}", "[-1,-\\frac{1}{2}]"),
        ("\\frac{1}{2} \\leqslant x < 8", "[\\frac{1}{2},8)"),
        ("x+y<3", None),
    ],
)
def test_inequalities_as_intervals(span, interval):
    assert as_interval(span) == interval


@pytest.mark.parametrize(
    "text, wanted",
    [
        ("Thus, $k-6=2$ or $k-6=-2$, and so $k=8$ or $k=4$.\n\nWe check it.", "8,4"),
        ("Therefore, $a=\\frac{1}{3}, b=-2$, and $c=5$, which gives $y=\\log _{1 / 3}(x-2)+5$.", "\\frac{1}{3},-2,5"),
        ("the answer is $\\frac{\\mathbf{9}}{\\mathbf{3 2}}$.", "\\frac{9}{32}"),
        ("is equal to $\\lfloor 102018.096\\rfloor=\\mathbf{1 0 2 , 0 1 8}$.", "102,018"),
        ("the cost rises by $\\frac{\\$ 5.40-\\$ 5.00}{\\$ 5.00} \\times 100 \\%=8 \\%$.", "8 \\%"),
        ("So $y=2|x|+k$ has no intersection points when $k<-5$.", "(-\\infty,-5)"),
        ("There are 12 such sequences.\n\nLong proof follows. It ends here.", "12"),
        ("Hence the number is $\\left(\\begin{array}{c}2 n \\\\ n\\end{array}\\right)$.", "\\binom{2 n}{n}"),
        ("Therefore $f(x)=x$ and $f(x)=-x$ are solutions.", "f(x)=x,f(x)=-x"),
        ("Thus, the minimum value is 1 .\n\nThus, the maximum value is 5 .", "1,5"),
    ],
)
def test_statement_candidates(text, wanted):
    assert wanted in statements(text)


def test_statements_are_bounded():
    hostile = "Then $x=1$. " * 20000 + "$" * 5000
    assert len(statements(hostile)) <= 60


def test_gold_normalisation():
    assert normalize_gold("8$,$4") == "8,4"
    assert normalize_gold("(-\\infty, 0) \\cup\\{1\\}$.") == "(-\\infty, 0) \\cup\\{1\\}"
    assert normalize_gold("\\$18.90") == "18.90"
    assert normalize_gold("62.5%") == "62.5" and normalize_gold("8 \\%") == "8"
    assert normalize_gold("4.5e33") == "4.5\\times10^{33}" and normalize_gold("-1./3") == "-1/3"


def test_compare_rules(grader):
    grades = grader.grade_answers(
        ["\\frac{1}{2}", "0.5", "3", None, "2\\sqrt{2}", "62.5 \\%", "62.5", "(1,1),(3,2)"],
        [normalize_gold(g) for g in ["0.5", "\\frac12", "4", "1", "\\sqrt{8}", "62.5\\%", "62.5\\%", "(3,2), (1,1)"]],
    )
    assert [g.reason for g in grades] == ["correct", "correct", "wrong", "no_answer"] + ["correct"] * 4
    numeric = grader.grade_answers(
        ["1080", "18.00", "17", "x"], [normalize_gold(g) for g in ["1,080", "18", "18", "18"]]
    )
    assert [g.reward for g in numeric] == [1.0, 1.0, 0.0, 0.0]
    exact = grader.grade_answers(["605", "605 ", "506", None], ["605"] * 4, compare="exact")
    assert [g.reason for g in exact] == ["correct", "correct", "wrong", "no_answer"]
    for old_name in ("math_verify", "numeric"):  # benchmark YAMLs of before the one grader
        assert grader.grade_answers(["1,080"], ["1080"], compare=old_name)[0].reason == "correct"
    with pytest.raises(ValueError, match="unknown"):
        grader.grade_answers(["1"], ["1"], compare="fuzzy")


def test_hostile_answer_times_out_not_fatal():
    with Grader(timeout_s=1.0, workers=1) as g:
        bomb = "(" * 3000 + "1" + ")" * 3000 + "^{" * 200 + "9" + "}" * 200
        grades = g.grade_answers([bomb, "2"], ["1", "2"])
    assert grades[0].reward == 0.0 and grades[0].reason in ("timeout", "grader_error", "wrong")
    assert grades[1].reason == "correct"
