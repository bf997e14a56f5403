"""The boxed-answer extractor and the one grader, with real math-verify worker processes (no mocks)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hacrl_exp.rewards import Grader, compact
from hacrl_exp.rewards.boxed import last_boxed
from hacrl_exp.tasks.base import Grade

TIMEOUT_S = 2.0
MARGIN_S = 1.5  # pipe round-trip, SIGKILL and join on a loaded 2-core machine


@pytest.fixture(scope="module")
def grader():
    g = Grader(timeout_s=TIMEOUT_S)
    g.start()
    yield g
    g.close()


def _children() -> set[int]:
    return {p.pid for p in mp.active_children()}


def _timed(grader: Grader, response: str, answer: str) -> tuple[Grade, float]:
    grader.start()  # a worker replaced after an earlier timeout is ready before the clock starts
    t0 = time.monotonic()
    (out,) = grader.grade([response], [answer])
    return out, time.monotonic() - t0


# --- last_boxed ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so $\\boxed{5}$.", "5"),
        ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}"),  # nested braces
        ("first \\boxed{3}, finally \\boxed{4}", "4"),  # the last box wins
        ("\\fbox{7}", "7"),
        ("$\\boxed 9$ done", "9"),
        ("\\boxed {12}", "12"),
        ("}}}{ \\boxed{4} }}}{", "4"),  # unbalanced braces around the box
        ("\\boxed{\\left\\{1,2\\right\\}}", "\\left\\{1,2\\right\\}"),  # escaped braces are not groups
        ("\\boxed{3} \\boxedx{1}", "3"),  # another command is not a box
        ("\\boxed{3} then \\boxed{4", None),  # the last box is truncated: no answer, not the earlier one
        ("\\boxed{}", ""),
        ("no box at all", None),
        ("\\boxed", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


@settings(max_examples=100, deadline=None)
@given(prefix=st.text(), content=st.text(alphabet="0123456789+-xy ^_=()[]", min_size=1))
def test_last_boxed_finds_an_appended_box(prefix, content):
    assert last_boxed(prefix + "\\boxed{" + content + "}") == content.strip()


def test_last_boxed_is_linear_on_hostile_text():
    cases = ["x" * 2_000_000 + "\\boxed{42}", "\\boxedx" * 300_000, "\\boxed{" + "{" * 1_000_000]
    cases.append("\\boxed \n" * 250_000)
    t0 = time.monotonic()
    results = [last_boxed(text) for text in cases]
    assert results == ["42", None, None, None]
    assert time.monotonic() - t0 < 5.0


def test_compact_form_is_conservative():
    assert compact("\\left( 3, \\dfrac{\\pi}{2} \\right).") == "(3,\\frac{\\pi}{2})"
    assert compact("$90^\\circ$") == "90"
    assert compact("\\text{cm}") == "\\text{cm}"
    assert compact("3") != compact("4")


# --- grading with math-verify -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response, answer, reward",
    [
        ("The answer is $\\boxed{\\frac{1}{2}}$.", "0.5", 1.0),
        ("\\boxed{2\\sqrt2}", "\\sqrt8", 1.0),
        ("\\boxed{3}", "4", 0.0),
        ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}", 1.0),
        ("\\boxed{x^2+2x+1}", "(x+1)^2", 1.0),
        ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "\\left( 3, \\frac{\\pi}{2} \\right)", 1.0),
        ("first \\boxed{3}, finally \\boxed{4}", "4", 1.0),
        ("first \\boxed{3}, finally \\boxed{4}", "3", 0.0),
        ("She makes \\boxed{18} dollars.", "18", 1.0),  # GSM8K: plain integers
        ("\\boxed{\\$18}", "18", 1.0),
        ("\\boxed{1,000}", "1000", 1.0),  # GSM8K golds have thousands separators removed
        ("\\boxed{1000}", "1,000", 1.0),
        ("\\boxed{1,2}", "12", 0.0),  # a pair, not a thousands separator
    ],
)
def test_grade(grader, response, answer, reward):
    (out,) = grader.grade([response], [answer])
    assert out.reward == reward
    assert out.reason == ("correct" if reward else "wrong")


@pytest.mark.parametrize("response", ["no box here", "\\boxed{}", "truncated \\boxed{\\frac{1}{", None])
def test_no_answer(grader, response):
    assert grader.grade([response], ["1"]) == [Grade(0.0, "no_answer")]


def test_fast_path_needs_no_worker():
    g = Grader(timeout_s=TIMEOUT_S)
    before = _children()
    assert g.grade(["\\boxed{\\dfrac{1}{2}}", "$\\boxed{ 90^\\circ }$"], ["\\frac{1}{2}", "90"]) == [Grade(1.0)] * 2
    assert _children() == before
    g.close()


def test_batch_with_duplicates_and_length_check(grader):
    responses = ["\\boxed{0.5}", "\\boxed{0.5}", "\\boxed{1/3}", "nothing"]
    assert [g.reason for g in grader.grade(responses, ["\\frac12"] * 4)] == ["correct", "correct", "wrong", "no_answer"]
    with pytest.raises(ValueError, match="2 answers for 1 gold"):
        grader.grade(["a", "b"], ["1"])


# --- hostile outputs ----------------------------------------------------------------------------------------------


def test_two_megabytes_of_text(grader):
    out, dt = _timed(grader, "blah " * 400_000 + "so \\boxed{7}", "7.0")
    assert out == Grade(1.0) and dt < TIMEOUT_S
    out, dt = _timed(grader, "\\boxed{" + "1+" * 1_000_000 + "1}", "7")  # the box starts before the tail: ignored
    assert out == Grade(0.0, "no_answer") and dt < TIMEOUT_S


@pytest.mark.parametrize("depth", [1000, 2000])
def test_deeply_nested_fractions(grader, depth):
    response = "\\boxed{" + "\\frac{" * depth + "1" + "}{2}" * depth + "}"
    out, dt = _timed(grader, response, "1")
    assert out.reward == 0.0 and out.reason in ("timeout", "grader_error", "no_answer", "wrong")
    assert dt < TIMEOUT_S + MARGIN_S
    assert grader.grade(["\\boxed{2}"], ["2.0"]) == [Grade(1.0)]


def test_sympy_bomb_times_out_and_grader_recovers(grader):
    out, dt = _timed(grader, "\\boxed{9^{9^{9^{9^{9}}}}}", "1")
    assert out == Grade(0.0, "timeout")
    assert TIMEOUT_S <= dt < TIMEOUT_S + MARGIN_S
    t0 = time.monotonic()
    assert grader.grade(["\\boxed{\\frac{2}{4}}"], ["0.5"]) == [Grade(1.0)]  # the replacement worker answers
    assert time.monotonic() - t0 < 10.0


def test_parallel_workers_isolate_a_timeout():
    with Grader(timeout_s=TIMEOUT_S, workers=2) as g:
        g.start()
        responses = ["\\boxed{10^{10^{10^{10}}}}"] + [f"\\boxed{{\\frac{{{i}}}{{2}}}}" for i in range(1, 9)]
        t0 = time.monotonic()
        out = g.grade(responses, ["1"] + [str(i / 2) for i in range(1, 9)])
        assert time.monotonic() - t0 < TIMEOUT_S + MARGIN_S
        assert out[0] == Grade(0.0, "timeout")
        assert out[1:] == [Grade(1.0)] * 8


def test_worker_crash_is_grader_error_and_replaced():
    before = _children()
    with Grader(timeout_s=30.0) as g:
        g.start()
        (worker,) = _children() - before
        threading.Timer(0.5, os.kill, (worker, signal.SIGKILL)).start()  # dies mid-answer, like a segfault
        t0 = time.monotonic()
        assert g.grade(["\\boxed{9^{9^{9^{9^{9}}}}}"], ["1"]) == [Grade(0.0, "grader_error")]
        assert time.monotonic() - t0 < 5.0
        assert g.grade(["\\boxed{3}"], ["3.0"]) == [Grade(1.0)]
        assert worker not in _children()


def test_close_leaves_no_children_and_grader_restarts():
    before = _children()
    g = Grader(timeout_s=TIMEOUT_S, workers=2)
    assert g.grade(["\\boxed{x^2+2x+1}"], ["(x+1)^2"]) == [Grade(1.0)]  # not numbers: math-verify decides
    assert len(_children() - before) == 2
    g.close()
    assert _children() == before
    assert g.grade(["\\boxed{x^2-1}"], ["(x-1)(x+1)"]) == [Grade(1.0)]  # started again, lazily
    g.close()
    assert _children() == before


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="timeout_s > 0"):
        Grader(timeout_s=0)
    with pytest.raises(ValueError, match="unknown"):
        Grader().grade(["\\boxed{1}"], ["1"], compare="fuzzy")
    with pytest.raises(ValueError, match="extractor"):
        Grader().grade(["\\boxed{1}"], ["1"], extractor="first_box")
