"""Answer forms, requested forms, exact number comparisons and gold rewrites: the rules of hacrl_exp.rewards, one
example per table row of their docstrings, plus properties on arbitrary text."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hacrl_exp.rewards import canonical, normalize_gold
from hacrl_exp.rewards.numbers import exact_values_equal, matches_scientific, variables_missing
from hacrl_exp.rewards.requested import ignores_request, requested_forms
from hacrl_exp.rewards.rewrite import rewrite


@pytest.mark.parametrize(
    "written, canon",
    [
        ("$\\left( 3, \\tfrac12 \\right)$", "(3, \\frac12)"),
        ("10\\,080", "10080"),
        ("11,\\! 111,\\! 111,\\! 100", "11111111100"),
        ("\\frac{20,000}{\\pi}", "\\frac{20000}{\\pi}"),
        ("4.5e33", "4.5\\times10^{33}"),
        ("1e-5", "1\\times10^{-5}"),
        ("-1./3", "-1/3"),
        ("90°", "90"),
        ("-3^\\circ C", "-3"),
        ("\\$32\\,348", "32348"),
        ("62.5\\%", "62.5"),
        ("5.4 \\text{ cents}", "5.4"),
        ("18 dollars", "18"),
        ("3.83 \\times 10^{35}\\ \\text{erg/s}", "3.83 \\times 10^{35}"),
        ("\\text{3 bolts}", "3"),
        ("4.\\overline{6}", "\\frac{14}{3}"),
        ("0.1\\overline{6}", "\\frac{1}{6}"),
        ("3 < x \\le 4", "(3,4]"),
        ("x<2 \\text{ or } x>3", "(-\\infty,2)\\cup(3,\\infty)"),
        ("x \\in [-2, 7]", "[-2, 7]"),
        ("\\text{(C)}", "C"),
        ("\\textbf{(A)}\\ 21", "21"),
        ("\\text{The answer is } 20", "20"),
        ("\\text{six}", "6"),
        ("75 \\text{ million years}", "75\\times10^{6}"),
        ("0.33^{\\prime\\prime}", "0.33"),
        ("4\\frac{2}{3}", "\\frac{14}{3}"),
        ("(\\pm 3, 2)", "(3,2),(-3,2)"),
        ("3 \\pm 2", "3 + 2,3 - 2"),
        ("\\begin{bmatrix} 1 \\\\ 2 \\end{bmatrix}", "(1,2)"),
        ("P(8,-2)", "(8,-2)"),
        ("\\sin^{-1}(x)", "\\arcsin(x)"),
        ("42.", "42"),
    ],
)
def test_canonical_forms(written, canon):
    assert canonical(written).replace(" ", "") == canon.replace(" ", "")  # spacing is not part of a form


@pytest.mark.parametrize("kept", ["\\text{Evelyn}", "\\text{cm}", "-2", "(1,2]", "1.63", "1, 100", "x^2+1"])
def test_what_stays_as_written(kept):
    """Near misses must stay distinguishable: signs, endpoints, digits, list items and bare units are not rewritten
    (a hedge `3 \\text{ or } 4` becomes the list `3,4`, which a one-part gold rejects: test_answer_shapes.py)."""
    assert canonical(kept) == kept


@settings(max_examples=1000, deadline=None, derandomize=True)  # the same examples in every CI run (20,000 passed once)
@given(st.text(alphabet="0123456789.,-+ \\{}()[]^_%$°xyabcfrtexinpmqsd<>=", max_size=60))
def test_canonical_never_raises_and_is_idempotent(text):
    once = canonical(text)
    assert canonical(once) == once


def test_canonical_is_linear_on_hostile_text():
    hostile = ["1," * 200_000, "\\pm" * 100_000, "x<" * 50_000, "\\text{a}" * 50_000, "9" * 500_000 + "e5"]
    start = time.monotonic()
    for text in hostile:
        canonical(text)
    assert time.monotonic() - start < 10.0


@pytest.mark.parametrize(
    "question, answer, gold, ignored",
    [
        ("Express your answer as a common fraction.", "1.5", "\\frac32", True),
        ("Express your answer as a common fraction.", "\\frac{3}{2}", "\\frac32", False),
        ("Round to the nearest hundredth.", "\\frac{5}{4}", "1.25", True),
        ("Express your answer as a mixed number.", "\\frac{9}{5}", "\\frac95", True),
        # MATH train/prealgebra/678: the gold carries its unit; a mixed number with a unit is still one
        ("Express your answer as a simplified mixed number.", "6\\frac{1}{6}\\text{ feet}", "6\\frac{1}{6}", False),
        ("Express your answer as a simplified mixed number.", "6\\frac{1}{6} \\, \\mbox{ft}", "6\\frac{1}{6}", False),
        ("Express your answer as a simplified mixed number.", "\\frac{37}{6}\\text{ feet}", "6\\frac{1}{6}", True),
        ("Express your answer as a common fraction.", "1\\frac{1}{2}\\text{ cups}", "\\frac32", True),
        ("Express your answer in simplest radical form.", "\\sqrt{117}", "3\\sqrt{13}", True),
        ("Express your answer in simplest radical form.", "3\\sqrt{13}", "3\\sqrt{13}", False),
        ("Enter your answer using interval notation.", "x > 5", "(5,\\infty)", True),
        ("Enter your answer using interval notation.", "x \\gt 5", "(5,\\infty)", True),
        ("Enter your answer using interval notation.", "x >= 5", "[5,\\infty)", True),
        ("Format your answer as $n \\times 10^x$.", "361", "3.61\\times10^{2}", True),
        ("Find the plane, where $A > 0$.", "-5x+7y=0", "5x-7y=0", True),
        ("Rationalize the denominator.", "\\frac{1}{\\sqrt3}", "\\frac{\\sqrt3}{3}", True),
        ("Factor $x^2-1$.", "x^2-1", "(x-1)(x+1)", True),
        ("Write it in the form $y = mx + b$.", "2x+y=0", "y=-2x", True),
        ("What is $3/2$?", "1.5", "\\frac32", False),  # no form asked: the value decides
        ("Give the endpoints as common fractions (not mixed numbers).", "[\\frac12, 2]", "[\\frac12,2]", False),
    ],
)
def test_requested_forms(question, answer, gold, ignored):
    assert ignores_request(answer, canonical(answer), gold, requested_forms(question)) is ignored


def test_mixed_number_with_its_unit_grades_right_against_the_gold():
    from hacrl_exp.rewards.grader import comparisons

    question = "How much taller is the oak tree than the elm tree? Express your answer as a simplified mixed number."
    gold = "6\\frac{1}{6}\\text{ feet}"
    assert not comparisons(gold, gold, question).ignores_form
    assert comparisons("\\frac{37}{6}", gold, question).ignores_form  # wrong under forms=requested


def test_units_are_stripped_in_bounded_time():
    from hacrl_exp.rewards.requested import without_units

    assert without_units("5!\\text{ ways}") == "5!"
    start = time.perf_counter()
    for hostile in (" " * 100_000 + "x", "\\text{a}" * 20_000, "\\, " * 50_000 + "\\text{a}"):
        without_units(hostile)
    assert time.perf_counter() - start < 1.0


def test_ordered_quantities_and_their_names():
    forms = requested_forms("The table gives times. Determine both $a$ and $b$ to two decimal places.")
    assert forms.ordered and forms.names == ("a", "b")
    assert not requested_forms("Determine all values of $k$ and $m$.").ordered  # "all": a set of solutions


@pytest.mark.parametrize(
    "answer, gold, equal",
    [
        ("1.60", "1.6", True),
        ("\\frac{8}{5}", "1.6", True),
        ("0.33", "1/3", False),
        ("2,1", "1,2", True),
        ("(2,1)", "(1,2)", False),
        ("(-\\infty,-5]", "(-\\infty,-5)", False),
        ("(2,-1,-18)", "2,-1,-18", True),
        ("x+1", "1", None),
    ],
)
def test_exact_values(answer, gold, equal):
    assert exact_values_equal(answer, gold) is equal


@pytest.mark.parametrize(
    "answer, gold, equal",
    [
        ("8.71\\times10^{8}", "8.7\\times10^{8}", True),  # more figures that round to the gold
        ("8.8\\times10^{8}", "8.7\\times10^{8}", False),
        ("9\\times10^{8}", "8.7\\times10^{8}", False),  # fewer figures than the gold states
        ("\\frac{1}{360000}", "2.7778\\times10^{-6}", True),
        ("17000", "1.70\\times10^{4}", True),
        ("1.7", "1.6", None),  # not a scientific gold: exact comparison decides elsewhere
    ],
)
def test_scientific_golds(answer, gold, equal):
    assert matches_scientific(answer, gold) is equal


def test_a_gold_variable_must_appear():
    assert variables_missing("\\frac{37}{4}", "\\frac{37}{4} m")
    assert not variables_missing("2x+3", "y=2x+3") and not variables_missing("5", "\\text{5 cm}")


@pytest.mark.parametrize(
    "gold, second",
    [
        ("4.5e33", "4.5 \\times 10^{33}"),
        ("1e-5", "0.00001"),
        ("3 \\times 10^{8}", "3e8"),
        ("-1./3", "-\\frac{1}{3}"),
        ("10080", "10\\,080"),
        ("1,080", "1080"),
        ("0.25", "\\frac{1}{4}"),
        ("\\frac{1}{4}", "0.25"),
        ("\\frac{2}{3}", "\\dfrac{2}{3}"),
        ("30^\\circ", "30°"),
        ("(3,4]", "3 < x \\leq 4"),
        ("[2,\\infty)", "x \\geq 2"),
        ("352146,362145", None),  # a list of six-digit numbers, not thousands
        ("42", None),
    ],
)
def test_rewrite(gold, second, grader):
    assert rewrite(gold) == second
    if second is not None:  # the second form is read as the same answer
        assert grader.grade_answers([second], [normalize_gold(gold)])[0].reason == "correct"
