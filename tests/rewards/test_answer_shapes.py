"""Answer shapes that other graders' test suites showed us misread (tests/rewards/data/outside/): lists written with a
comma and a space or with "and"/"or", relations, labelled golds, answers over several boxes, `array` matrices. Each
class is graded through the real grader (math-verify workers included), with the near misses that must stay wrong."""

from __future__ import annotations

import time

import pytest

from hacrl_exp.rewards import Grader, canonical
from hacrl_exp.rewards.boxed import MAX_FINAL_BOXES, final_boxes
from hacrl_exp.rewards.extract import as_interval
from hacrl_exp.rewards.forms import label_value

MATRIX = "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}"


@pytest.fixture(scope="module")
def grader():
    g = Grader(timeout_s=5.0)
    yield g
    g.close()


def _reward(grader: Grader, response: str, gold: str) -> float:
    (out,) = grader.grade([response], [gold])
    return out.reward


@pytest.mark.parametrize(
    "response, gold, reward",
    [
        # a comma and a space part list items; thousands separators are a comma alone, `{,}`, `,\!` or a thin space
        ("\\boxed{32, 349}", "32349", 0.0),
        ("\\boxed{32,349}", "32349", 1.0),
        ("\\boxed{32{,}349}", "32349", 1.0),
        ("\\boxed{32\\,349}", "32349", 1.0),
        ("\\boxed{32,\\!349}", "32349", 1.0),
        ("\\boxed{100, 1}", "1, 100", 1.0),
        ("\\boxed{1100}", "1, 100", 0.0),
        # "and" / "or" between list items is a separator; a hedge for a one-part gold stays wrong
        ("\\boxed{19, 46, \\text{ and } 82}", "19, 46, and 82", 1.0),
        ("\\boxed{19, 46, 82}", "19, 46, \\text{ and } 82", 1.0),
        ("\\boxed{21, 36, \\text{ and } 82}", "19, 46, and 82", 0.0),
        ("\\boxed{3 \\text{ or } 4}", "3, 4", 1.0),
        ("\\boxed{3 \\text{ or } 4}", "3", 0.0),
        ("\\boxed{3 \\text{ and } 4}", "3", 0.0),
        ("\\boxed{\\sqrt{2} \\text{ or } \\sqrt{3}}", "\\sqrt{2}", 0.0),
        ("\\boxed{x = 2 \\text{ or } x = 5}", "2", 0.0),
        # relations: ASCII and LaTeX spellings, sides swapped, a negated variable, a range of a function
        ("\\boxed{x \\geq 5}", "x >= 5", 1.0),
        ("\\boxed{x <= 2}", "x \\leq 2", 1.0),
        ("\\boxed{x \\lt 3}", "x < 3", 1.0),
        ("\\boxed{x \\gt 5}", "x > 5", 1.0),
        ("\\boxed{5 \\geq x}", "x \\leq 5", 1.0),
        ("\\boxed{-x > -1}", "x < 1", 1.0),
        ("\\boxed{(0,1)}", "0<f(x)<1", 1.0),
        ("\\boxed{x \\neq 3}", "x != 3", 1.0),
        ("\\boxed{x > -1}", "x < 1", 0.0),
        ("\\boxed{x \\leq 5}", "x \\geq 5", 0.0),
        ("\\boxed{5 \\leq x}", "x \\leq 5", 0.0),
        ("\\boxed{x < 5}", "x \\leq 5", 0.0),
        ("\\boxed{-x > 1}", "x < 1", 0.0),
        # a gold `label = value` accepts the bare value; several labels fix the values' order
        ("\\boxed{(3,2)}", "(p,q)=(3,2)", 1.0),
        ("\\boxed{(2,3)}", "(p,q)=(3,2)", 0.0),
        ("\\boxed{4, 5}", "AB=4,CD=5", 1.0),
        ("\\boxed{5, 4}", "AB=4,CD=5", 0.0),
        ("\\boxed{4}", "AB=4,CD=5", 0.0),
        ("\\boxed{\\frac1{\\sqrt6}}", "\\frac{NO}{BO}=\\frac1{\\sqrt6}", 1.0),
        ("\\boxed{\\frac{1}{6}}", "\\frac{NO}{BO}=\\frac1{\\sqrt6}", 0.0),
        ("\\boxed{7:32}", "S_{MBCN}:S=7:32", 1.0),
        ("\\boxed{0}", "a+3z=0", 0.0),  # an equation, not a label
        ("\\boxed{11a+c}", "7 = 11a+c", 0.0),
        # several boxes read together when, and only when, the gold has several parts
        ("so \\boxed{(2,2)} and \\boxed{(6,2)}", "(2,2),(6,2)", 1.0),
        ("\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}", "(2,2),(6,2)", 1.0),
        ("\\boxed{(2,2)} and \\boxed{(6,2)}", "(2,2),(6,2),(1,1)", 0.0),
        ("\\boxed{(2,2)} and \\boxed{(6,2)}", "(2,2)", 0.0),  # one part: the last box is the answer
        ("\\boxed{1}, \\boxed{2}, \\boxed{3}", "\\{1,2,3\\}", 1.0),
        ("\\boxed{k = 45} \\quad \\text{and} \\quad \\boxed{n = 2}", "k = 45, n = 2", 1.0),
        ("\\boxed{1}. Checking again, the answer is \\boxed{2}", "1, 2", 0.0),  # a sentence apart: not one answer
        ("\\boxed{1} no, wait: \\boxed{2}", "1, 2", 0.0),
        # `array` matrices read like `pmatrix`
        ("\\boxed{\\left[\\begin{array}{cc}1 & 2 \\\\3 & 4\\end{array}\\right]}", MATRIX, 1.0),
        ("\\boxed{\\left[\\begin{array}{cc}1 & 2 \\\\3 & 5\\end{array}\\right]}", MATRIX, 0.0),
    ],
)
def test_grade_answer_shapes(grader, response, gold, reward):
    assert _reward(grader, response, gold) == reward


@pytest.mark.parametrize(
    "written, canon",
    [
        ("32, 349", "32, 349"),
        ("11,\\! 111,\\! 100", "11111100"),
        ("19, 46, and 82", "19, 46,82"),
        ("6, 8\\text{, and }10", "6, 8,10"),  # MATH train/algebra/1642's gold
        ("(11,7)or(7,11)", "(11,7),(7,11)"),
        ("\\text{odd or even}", "\\text{odd or even}"),  # words inside one text are not a list
        ("x >= 5", "[5,\\infty)"),
        ("-2 \\\\le x \\\\le 7", "[-2,7]"),  # a relation escaped twice
        ("x != 3", "x \\neq 3"),
        ("\\left[\\begin{array}{cc}1&2\\\\3&4\\end{array}\\right]", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}"),
        ("\\left(\\begin{array}{c}5\\\\2\\end{array}\\right)", "(\\begin{array}{c}5\\\\2\\end{array})"),  # a binomial
        ("185\\\\", "185"),
    ],
)
def test_canonical_shapes(written, canon):
    assert canonical(written) == canon


@pytest.mark.parametrize(
    "span, interval",
    [
        ("5 \\geq x", "(-\\infty,5]"),
        ("-x>-1", "(-\\infty,1)"),
        ("-x<a+b", "(-(a+b),\\infty)"),
        ("3>x>1", "(1,3)"),
        ("0<f(x)<1", "(0,1)"),
        ("1<x>2", None),  # mixed directions
        ("x<2,x>3", None),  # a list of relations, not one
        ("x+y<3", None),
    ],
)
def test_relations_as_intervals(span, interval):
    assert as_interval(span) == interval


@pytest.mark.parametrize(
    "item, labelled",
    [
        ("(p,q)=(3,2)", ("(p,q)", "(3,2)")),
        ("\\frac{NO}{BO}=\\frac{1}{\\sqrt{6}}", ("\\frac{NO}{BO}", "\\frac{1}{\\sqrt{6}}")),
        ("N_{\\min} = 2500", ("N_{\\min}", "2500")),
        ("|AB|=1", ("|AB|", "1")),
        ("2x+4y-3=0", None),
        ("x^2 = 4", None),
        ("z = 1 + 1 = 2", None),
        ("x =", None),
    ],
)
def test_label_value(item, labelled):
    assert label_value(item) == labelled


@pytest.mark.parametrize(
    "text, boxes",
    [
        ("\\boxed{1}\\boxed{2}", ["1", "2"]),
        ("\\(y_1 = \\boxed{3}\\) and \\(y_2 = \\boxed{4}\\)", ["3", "4"]),
        ("\\boxed{1} papers and \\boxed{2} bins", ["2"]),
        ("\\boxed{1}. \\boxed{2}", ["2"]),
        ("\\boxed{\\boxed{3}}", ["3"]),
        ("\\boxed{1}, \\boxed{2", []),
        ("no box", []),
    ],
)
def test_final_boxes(text, boxes):
    assert final_boxes(text) == boxes


def test_final_boxes_is_bounded_on_hostile_text():
    hostile = ["\\boxed{1}, " * 200_000, "\\boxed{1}" + " and" * 500_000 + "\\boxed{2}", "\\boxed{" * 300_000 + "}"]
    start = time.monotonic()
    found = [final_boxes(text) for text in hostile]
    assert len(found[0]) == MAX_FINAL_BOXES and found[1] == ["2"]
    assert time.monotonic() - start < 5.0


def test_shape_rules_are_bounded_on_hostile_text():
    hostile = [
        "1" + " " * 200_000 + "x",  # whitespace runs were quadratic for the unit and percent rules
        "1" + "\\," * 100_000 + "\\%",
        "1, " * 100_000 + "and 2",
        "[\\begin{array}{cc}" * 30_000,
        "[\\begin{array}{cc}1" + "\\end{array}" * 30_000,
        "x \\geq " * 50_000,
        "\\\\le" * 100_000,
        "(p,q)=" * 50_000 + "1",
        "\\" * 100_000,
    ]
    start = time.monotonic()
    for text in hostile:
        canonical(text)
        label_value(text)
    assert time.monotonic() - start < 10.0
