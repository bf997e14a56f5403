"""The grading policy (hacrl_exp.rewards.FORMS): `requested` rejects a right value in a form the question did not ask
for, `value` lets the value alone decide; every other rule, false-positive guards included, is the same under both,
and one grading pass gives both verdicts. Hand values; the labelled sets are checked in test_adversarial_set.py."""

from __future__ import annotations

import json

import pytest

from hacrl_exp.config.evaluate_schema import CHOICES as EVALUATE_CHOICES
from hacrl_exp.config.validate import CHOICES
from hacrl_exp.errors import ConfigError
from hacrl_exp.rewards import FORMS, Grade, resolve_forms
from hacrl_exp.tasks import build_task
from hacrl_exp.tasks.base import Problem
from hacrl_exp.tasks.math import MathTask
from hacrl_exp.trainer.validate import preflight

RADICAL = "Simplify $\\sqrt{117}$. Express your answer in simplest radical form."
FRACTION = "Write $0.625$ as a fraction. Express your answer as a common fraction."
CASES = [
    # (question, response, gold, verdict under requested, verdict under value)
    (RADICAL, "so \\boxed{\\sqrt{117}}", "3\\sqrt{13}", "wrong", "correct"),
    (FRACTION, "so \\boxed{0.625}", "\\frac{5}{8}", "wrong", "correct"),
    (FRACTION, "so \\boxed{25\\%}", "\\frac{1}{4}", "wrong", "correct"),  # a percent read as its value / 100
    (RADICAL, "so \\boxed{3\\sqrt{13}}", "3\\sqrt{13}", "correct", "correct"),
    # controls that both policies reject: a wrong value in the unrequested form, a near miss, a swapped pair where
    # the question names the quantities in order (a false-positive guard, not a form)
    (FRACTION, "so \\boxed{0.6}", "\\frac{5}{8}", "wrong", "wrong"),
    (RADICAL, "so \\boxed{\\sqrt{118}}", "3\\sqrt{13}", "wrong", "wrong"),
    ("Find $a$ and $b$.", "so \\boxed{3, 2}", "2, 3", "wrong", "wrong"),
    (FRACTION, "no box: 5/8", "\\frac{5}{8}", "no_answer", "no_answer"),
]


@pytest.mark.parametrize("forms", FORMS)
def test_both_verdicts_in_one_pass(grader, forms):
    questions, responses, golds, requested, value = zip(*CASES)
    grades = grader.grade(list(responses), list(golds), questions=list(questions), forms=forms)
    expected = requested if forms == "requested" else value
    assert [g.reason for g in grades] == list(expected)  # the policy asked for decides reward and reason
    assert [g.reward for g in grades] == [1.0 if r == "correct" else 0.0 for r in expected]
    assert all(g.forms == forms for g in grades)
    assert [g.reason_under("requested") for g in grades] == list(
        requested
    )  # and the other policy's verdict rides along
    assert [g.reason_under("value") for g in grades] == list(value)
    assert [g.reward_under("value") for g in grades] == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]


def test_without_a_question_or_a_math_rule_the_policies_agree(grader):
    for forms in FORMS:
        (plain,) = grader.grade(["\\boxed{0.625}"], ["\\frac{5}{8}"], forms=forms)  # no question: no form asked
        assert plain.reason == "correct" and plain.other_reason is None
    exact = grader.grade(["605", "60"], ["605", "605"], extractor="whole_text", compare="exact", forms="value")
    assert [g.reason_under(f) for g in exact for f in FORMS] == ["correct", "correct", "wrong", "wrong"]
    (verl,) = grader.grade(["\\boxed{0.625}"], ["\\frac{5}{8}"], compare="verl", questions=[FRACTION], forms="value")
    assert verl.reason_under("requested") == verl.reason_under("value") == "wrong"  # verl reads no form


def test_a_grade_built_by_hand_has_one_verdict():
    assert Grade(1.0).reason_under("value") == Grade(1.0).reason_under("requested") == "correct"
    assert Grade(0.0, "wrong", forms="requested", other_reason="correct").reward_under("value") == 1.0


def test_policy_names_are_checked_and_the_same_everywhere():
    assert FORMS[0] == "requested"  # the default: every verdict as before the setting existed
    assert CHOICES["task.grader_forms"] == EVALUATE_CHOICES["grader.forms"] == FORMS
    with pytest.raises(ValueError, match=r"grader forms 'values' is unknown; use one of \['requested', 'value'\]"):
        resolve_forms("values")


def test_math_task_grades_under_its_policy(grader):
    problem = Problem("p", RADICAL, "3\\sqrt{13}", meta={"problem_text": RADICAL})
    for forms, reward in (("requested", 0.0), ("value", 1.0)):
        (grade,) = MathTask(grader=grader, grader_forms=forms).grade(["\\boxed{\\sqrt{117}}"], [problem])
        assert grade.reward == reward and grade.forms == forms
    with pytest.raises(ValueError, match="grader_forms='value' needs reward='math_verify'"):
        MathTask(grader=grader, reward="verl", grader_forms="value")
    with pytest.raises(ValueError, match="grader forms 'vaule' is unknown"):
        MathTask(grader=grader, grader_forms="vaule")


def test_training_config_selects_the_policy(tmp_path):
    for name in ("math500.jsonl", "math_train.jsonl"):
        (tmp_path / name).write_text(json.dumps({"id": "a", "problem": "1+1?", "answer": "2"}) + "\n")
    assert preflight(["task=math", f"task.data_dir={tmp_path}"]).task.grader_forms == "requested"
    config = preflight(["task=math", f"task.data_dir={tmp_path}", "task.grader_forms=value"])
    task = build_task(config.task)
    try:
        assert task.forms == "value"
    finally:
        task.close()


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["task=math", "task.grader_forms=vaule"], "task.grader_forms='vaule' is not one of ['requested', 'value']"),
        (["task.grader_forms=value"], "task.grader_forms=value applies to task=math with task.reward=math_verify"),
        (["task=math", "task.reward=verl", "task.grader_forms=value"], "task.reward=verl reads no form"),
    ],
)
def test_bad_policy_settings_are_one_config_error(overrides, message):
    with pytest.raises(ConfigError) as err:
        preflight(overrides)
    assert message in str(err.value) and "\n" not in str(err.value)
