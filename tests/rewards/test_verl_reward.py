"""task.reward=verl: our port of verl's MATH `compute_score` (hacrl_exp.rewards.verl_math) gives verl's own scores, goes
through the one Grader path, and is selected by the config switch; the default reward is unchanged.

verl's scores come from tests/rewards/data/verl_reference.json, written by verl's own function
(`python -m benchmarks.reward_agreement --verl-file .../math_reward.py --write-reference`). When verl's file can be
found (verl installed, or HACRL_VERL_REWARD_FILE naming the file), the port is also compared with it directly.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hacrl_exp.errors import ConfigError
from hacrl_exp.rewards import Grader, verl_math
from hacrl_exp.tasks import build_task
from hacrl_exp.tasks.base import Problem
from hacrl_exp.tasks.math import MathTask, gold_answer
from hacrl_exp.trainer.validate import preflight

DATA = Path(__file__).parent / "data"
REFERENCE = json.loads((DATA / "verl_reference.json").read_text(encoding="utf-8"))


def labelled(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture(scope="module")
def grader():
    with Grader() as g:  # compare='verl' never starts a math-verify worker
        yield g


def verl_module():
    """verl's own reward module, loaded from its file alone (importing verl needs torch and ray); None if absent."""
    path = os.environ.get("HACRL_VERL_REWARD_FILE")
    if path is None:
        spec = importlib.util.find_spec("verl")
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = Path(next(iter(spec.submodule_search_locations))) / "utils" / "reward_score"
        path = next((str(folder / f) for f in ("math_reward.py", "math.py") if (folder / f).is_file()), None)
        if path is None:
            return None
    spec = importlib.util.spec_from_file_location("verl_math_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VERL = verl_module()


# --- equality with verl -------------------------------------------------------------------------------------------


def test_port_gives_verls_scores_on_the_vectors(grader):
    vectors = REFERENCE["vectors"]
    assert len(vectors) >= 40 and {s for _, _, s in vectors} == {0.0, 1.0}
    for response, gold, score in vectors:
        assert verl_math.compute_score(response, gold) == score, (response, gold)
    grades = grader.grade([r for r, _, _ in vectors], [g for _, g, _ in vectors], compare="verl")
    assert [g.reward for g in grades] == [s for _, _, s in vectors]


@pytest.mark.parametrize("name", ["grader_adversarial", "grader_heldout"])
def test_port_gives_verls_scores_on_the_labelled_sets(grader, name):
    rows, reference = labelled(name), REFERENCE[name]
    assert len(reference) == len(rows)
    grades = grader.grade([r["response"] for r in rows], [r["gold"] for r in rows], compare="verl")
    assert {r["id"]: g.reward for r, g in zip(rows, grades)} == reference


def test_port_gives_verls_scores_on_math500_gold_solutions(data_dir, grader):
    task = MathTask(eval_path=data_dir / "math500.jsonl", grader=grader, reward="verl")
    problems = task.eval_problems()
    grades = task.grade([p.solution for p in problems], problems)
    assert {p.id: g.reward for p, g in zip(problems, grades)} == REFERENCE["math500"]


@pytest.mark.skipif(VERL is None, reason="verl's reward file not found (pip install verl, or HACRL_VERL_REWARD_FILE)")
def test_port_equals_verls_own_function_when_available():
    verl = VERL
    old = Path(verl.__file__).name == "math.py"  # verl <= 0.4 strips `\%` twice and never `\\%` (see verl_math)
    pairs = [(r, g) for r, g, _ in REFERENCE["vectors"] if not (old and "\\\\%" in r)]
    pairs += [(r["response"], r["gold"]) for name in ("grader_adversarial", "grader_heldout") for r in labelled(name)]
    for response, gold in pairs:
        with contextlib.redirect_stdout(io.StringIO()):
            assert verl_math.compute_score(response, gold) == verl.compute_score(response, gold), (response, gold)
        assert verl_math.strip_string(gold) == verl.strip_string(gold), gold


TOKENS = [*"0123456789.,-/=x {}()$%!\\^_\n", "\\boxed", "\\boxed ", "\\frac", "\\sqrt", "\\text{ ", "\\left", "\\fbox"]
LATEX = st.lists(st.sampled_from(TOKENS), max_size=24).map("".join)


@pytest.mark.skipif(VERL is None, reason="verl's reward file not found")
@settings(max_examples=300, deadline=None)
@given(response=LATEX, gold=LATEX)
def test_port_equals_verls_own_function_on_generated_text(response, gold):
    with contextlib.redirect_stdout(io.StringIO()):  # verl prints the exceptions it swallows
        assert verl_math.compute_score(response, gold) == VERL.compute_score(response, gold)


# --- the Grader path ----------------------------------------------------------------------------------------------


def test_grader_reasons_and_extracted(grader):
    responses = ["so \\boxed{\\dfrac34}", "so \\boxed{0.75}", "no box: 3/4", "so \\boxed{}", "\\fbox{3/4}", None]
    grades = grader.grade(responses, ["\\frac{3}{4}"] * 6, compare="verl")
    assert [(g.reward, g.reason) for g in grades] == [
        (1.0, "correct"),
        (0.0, "wrong"),
        (0.0, "no_answer"),
        (0.0, "no_answer"),
        (0.0, "no_answer"),  # verl's remove_boxed fails on \fbox: verl scores 0
        (0.0, "no_answer"),
    ]
    assert grades[0].extracted == "\\dfrac34" and grades[2].extracted is None
    with pytest.raises(ValueError, match="extractor='boxed'"):
        grader.grade(["| 5"], ["5"], extractor="after_bar", compare="verl")


def test_verl_reads_the_whole_response_and_stays_fast(grader):
    long = "x" * 300_000 + " so \\boxed{7}"
    started = time.monotonic()
    (grade,) = Grader(max_chars=100).grade([long], ["7"], compare="verl")
    hostile = grader.grade(["{" * 100_000 + "\\boxed{" + "}" * 100_000, "\\frac" * 50_000], ["1", "1"], compare="verl")
    assert grade.reward == 1.0 and [g.reward for g in hostile] == [0.0, 0.0]
    assert time.monotonic() - started < 5.0


# --- the switch ---------------------------------------------------------------------------------------------------


def test_default_reward_is_unchanged(grader):
    problem = Problem("p", "What is 3/4?", "\\frac{3}{4}", meta={"answer_raw": "\\dfrac{3}{4}", "problem_text": "?"})
    responses = ["so \\boxed{0.75}", "so \\boxed{\\frac34}", "\\boxed{\\frac{3}{4}}"]
    math_verify, verl = (_task(grader, reward) for reward in ("math_verify", "verl"))
    assert math_verify.compare == "math" and verl.compare == "verl"
    expected = grader.grade(responses, ["\\frac{3}{4}"] * 3, compare="math", questions=["?"] * 3)
    assert math_verify.grade(responses, [problem] * 3) == expected  # the default is today's grader call
    assert [g.reward for g in verl.grade(responses, [problem] * 3)] == [0.0, 1.0, 1.0]
    assert gold_answer(problem, "math") == "\\frac{3}{4}" and gold_answer(problem, "verl") == "\\dfrac{3}{4}"
    with pytest.raises(ValueError, match="reward='verll' is unknown"):
        MathTask(reward="verll")


def _task(grader, reward: str) -> MathTask:
    return MathTask(grader=grader, reward=reward)  # data is read on first use: none here


def test_math_task_keeps_the_answer_as_written(data_dir, grader):
    task = MathTask(eval_path=data_dir / "math500.jsonl", grader=grader)
    rows = {json.loads(line)["id"]: json.loads(line) for line in (data_dir / "math500.jsonl").open(encoding="utf-8")}
    for p in task.eval_problems():
        assert p.meta["answer_raw"] == rows[p.id]["answer"]


def test_config_switch_selects_the_reward(tmp_path):
    for line in ("math500.jsonl", "math_train.jsonl"):
        (tmp_path / line).write_text(json.dumps({"id": "a", "problem": "1+1?", "answer": "2"}) + "\n")
    default = preflight(["task=math", f"task.data_dir={tmp_path}"])
    assert default.task.reward == "math_verify"
    config = preflight(["task=math", f"task.data_dir={tmp_path}", "task.reward=verl"])
    assert config.task.reward == "verl"
    for cfg, compare in ((default.task, "math"), (config.task, "verl")):
        task = build_task(cfg)
        try:
            assert task.compare == compare
        finally:
            task.close()
    with pytest.raises(ConfigError, match=r"task.reward='verll' is not one of \['math_verify', 'verl'\]"):
        preflight(["task=math", "task.reward=verll"])
    with pytest.raises(ConfigError, match="task.reward=verl applies to task=math only"):
        preflight(["task.reward=verl"])  # the default task is arithmetic
