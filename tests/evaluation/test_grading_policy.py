"""The grading policy in evaluation output: the headline under the other policy beside the graded one (summary rows,
MLflow metrics, the printed table), and evaluate's `grader.forms` setting. The end-to-end run checks the params and
parquet columns (test_end_to_end.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from hacrl_exp.config.evaluate_schema import compose_evaluate, validate_evaluate
from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.pipeline import headline_table
from hacrl_exp.evaluation.runner import score_benchmark
from hacrl_exp.evaluation.spec import load_benchmark


def graded(requested: list[float], value: list[float], forms: str) -> pd.DataFrame:
    """One sample per problem, its reward under policy `forms` and under each policy."""
    n = len(requested)
    return pd.DataFrame(
        {
            "problem_id": [f"p{i}" for i in range(n)],
            "category": "all",
            "answer": "1",
            "sample": 0,
            "extracted": "x",
            "reward": requested if forms == "requested" else value,
            "reason": "wrong",
            "reward_forms_requested": requested,
            "reward_forms_value": value,
            "finished": True,
        }
    )


def metric(summary: pd.DataFrame, name: str) -> float:
    (value,) = summary.loc[summary["metric"] == name, "value"]
    return value


@pytest.mark.parametrize("forms, other", [("requested", "value"), ("value", "requested")])
def test_the_other_policys_headline_is_beside_it(forms, other):
    requested, value = [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]  # two right values in forms not asked for
    frame = graded(requested, value, forms)
    _, summary = score_benchmark(frame, load_benchmark("math500"), samples=1, seed=0, n_boot=200, forms=forms)
    assert metric(summary, "accuracy") == (0.25 if forms == "requested" else 0.75)
    assert metric(summary, f"accuracy_forms_{other}") == (0.75 if other == "value" else 0.25)
    assert f"accuracy_forms_{forms}" not in set(summary["metric"])  # the graded policy's headline is `accuracy`
    row = summary[summary["metric"] == f"accuracy_forms_{other}"].iloc[0]
    assert row.ci_low <= row.value <= row.ci_high and row.n == 4


def test_a_rule_that_reads_no_form_has_no_second_headline():
    frame = graded([1.0, 0.0], [1.0, 0.0], "requested")
    _, summary = score_benchmark(frame, load_benchmark("arithmetic"), samples=1, n_boot=50)
    assert not summary["metric"].str.contains("_forms_").any()


def test_printed_table_names_both_policies():
    parts = []
    for bench in ("math500", "arithmetic"):
        frame = graded([1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], "value")
        _, summary = score_benchmark(frame, load_benchmark(bench), samples=1, n_boot=50, forms="value")
        parts.append(summary.assign(agent="a", step=1, grader_forms="value"))
    table = headline_table(pd.concat(parts, ignore_index=True)).splitlines()
    assert "| forms=value [95% CI] | forms=requested [95% CI] |" in table[0]
    math500, arithmetic = table[2], table[3]
    assert "| 0.750 [" in math500 and "| 0.250 [" in math500
    assert arithmetic.split(" | ")[5] == "n/a"  # exact match reads no form


def test_evaluate_setting_is_validated():
    assert validate_evaluate(compose_evaluate([])).grader.forms == "requested"
    assert validate_evaluate(compose_evaluate(["grader.forms=value"])).grader.forms == "value"
    with pytest.raises(ConfigError, match=r"grader.forms='vaule' is not one of \['requested', 'value'\]"):
        validate_evaluate(compose_evaluate(["grader.forms=vaule"]))
