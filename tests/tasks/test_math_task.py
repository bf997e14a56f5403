"""MathTask: loading and validating JSONL data, the training stream, prompts, categories, and grading."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from hacrl_exp.rewards import Grader
from hacrl_exp.tasks.base import Grade, Task
from hacrl_exp.tasks.math import DataError, MathTask
from hacrl_exp.tasks.problem_data import DATA_DIR_ENV

SUFFIX = " Let's think step by step and output the final answer within \\boxed{}."
SHARED = Path(os.environ.get(DATA_DIR_ENV) or Path(__file__).parents[2].parent / "shared" / "data")


def shared_file(name: str) -> Path:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"{path} not present (set {DATA_DIR_ENV} to the shared data folder)")
    return path


@pytest.fixture(scope="module")
def grader():
    g = Grader(timeout_s=5.0)
    yield g
    g.close()


def row(i: int, **kw) -> dict:
    base = {"id": f"p{i}", "problem": f"What is {i}+{i}?", "answer": str(2 * i), "solution": f"\\boxed{{{2 * i}}}"}
    base["subject"] = ["Algebra", "Geometry", "Number Theory"][i % 3]
    return {**base, **kw}


def write(path: Path, lines: list) -> Path:
    """Rows (dicts) as JSON lines; str and bytes items are written verbatim."""
    with open(path, "wb") as f:
        for item in lines:
            data = item if isinstance(item, bytes) else (item if isinstance(item, str) else json.dumps(item)).encode()
            f.write(data + b"\n")
    return path


@pytest.fixture
def files(tmp_path):
    return write(tmp_path / "train.jsonl", [row(i) for i in range(10)]), write(
        tmp_path / "eval.jsonl", [row(i, id=f"e{i}") for i in range(100, 106)]
    )


def test_prompt_suffix_categories_and_fields(files, grader):
    task: Task = MathTask(*files, grader=grader)
    assert all(hasattr(task, attr) for attr in ("name", "categories", "train_problems", "eval_problems", "grade"))
    p = task.train_set[3]
    assert p.prompt == "What is 3+3?" + SUFFIX
    assert (p.id, p.answer, p.category, p.solution) == ("p3", "6", "Algebra", "\\boxed{6}")
    assert task.categories == ["Algebra", "Geometry", "Number Theory"]
    assert MathTask(*files, category_field="level", grader=grader).categories == ["all"]  # no such field


def test_train_stream_is_a_pure_function_of_seed_and_step(files, grader):
    a, b = MathTask(*files, seed=7, grader=grader), MathTask(*files, seed=7, grader=grader)
    ids = lambda probs: [p.id for p in probs]  # noqa: E731
    later_first = [ids(b.train_problems(s, 4)) for s in (9, 2, 1)]
    assert later_first == [ids(a.train_problems(s, 4)) for s in (9, 2, 1)]
    assert ids(a.train_problems(2, 4)) == ids(a.train_problems(2, 4))
    stream = [i for s in range(1, 6) for i in ids(a.train_problems(s, 4))]  # 20 = two epochs of 10, from step 1
    assert sorted(stream[:10]) == sorted(stream[10:]) == sorted(f"p{i}" for i in range(10))
    assert stream[:10] != stream[10:]  # each epoch has its own order
    assert ids(MathTask(*files, seed=8, grader=grader).train_problems(1, 10)) != stream[:10]
    with pytest.raises(ValueError, match="step >= 1"):
        a.train_problems(0, 4)  # the loop's steps count from 1: step 0 would skip the first n problems of epoch 0


def test_extra_problems_leave_the_train_stream_where_it_was(files, grader):
    """Dynamic sampling's fresh prompts: train problems, a pure function of (seed, step, round, n), distinct within
    a draw, and drawing them does not move the steps' stream."""
    task, again = MathTask(*files, seed=7, grader=grader), MathTask(*files, seed=7, grader=grader)
    ids = lambda probs: [p.id for p in probs]  # noqa: E731
    extra = ids(task.extra_problems(3, 1, 6))
    assert extra == ids(again.extra_problems(3, 1, 6)) and len(set(extra)) == 6
    assert set(extra) <= {p.id for p in task.train_set}
    assert ids(task.extra_problems(3, 2, 6)) != extra != ids(task.extra_problems(4, 1, 6))  # new per round, step
    assert ids(task.train_problems(2, 4)) == ids(MathTask(*files, seed=7, grader=grader).train_problems(2, 4))
    assert len(task.extra_problems(1, 1, 25)) == 25  # more than the train set: drawn with replacement
    assert task.extra_problems(1, 1, 0) == []
    with pytest.raises(ValueError, match="round >= 1"):
        task.extra_problems(1, 0, 4)


def test_every_problem_is_drawn_once_per_epoch_from_the_first_step(files, grader):
    """The training loop calls train_problems(step, n) with step = 1, 2, …: the first ⌈size/n⌉ steps cover the
    whole train set, with no problem skipped or repeated inside an epoch (issue 17: an off-by-one lost n problems)."""
    task = MathTask(*files, seed=3, grader=grader)
    size = len(task.train_set)
    for n in (1, 2, 5, 10):
        first_epoch = [p.id for step in range(1, size // n + 1) for p in task.train_problems(step, n)]
        assert sorted(first_epoch) == sorted(p.id for p in task.train_set), n


def test_eval_limit_and_grade(files, grader):
    task = MathTask(*files, eval_limit=3, grader=grader)
    probs = task.eval_problems()
    assert [p.id for p in probs] == ["e100", "e101", "e102"]
    responses = ["so \\boxed{200}", "\\boxed{201}", "no idea"]
    assert task.grade(responses, probs) == [Grade(1.0), Grade(0.0, "wrong"), Grade(0.0, "no_answer")]
    with pytest.raises(ValueError, match="pass one per response"):
        task.grade(responses[:2], probs)
    task.close()  # a shared grader stays open
    assert grader.grade(["\\boxed{1}"], ["1"]) == [Grade(1.0)]


BAD_ROWS = {
    "invalid JSON": ('{"id": "x", "problem": "1+1?", "answer": "2"', "invalid JSON"),
    "not an object": ('["1+1?", "2"]', "not an object"),
    "missing problem": ({"id": "x", "answer": "2"}, "'problem' is missing"),
    "missing answer": ({"id": "x", "problem": "1+1?"}, "'answer' is missing"),
    "empty answer": ({"id": "x", "problem": "1+1?", "answer": "  "}, "'answer' is empty"),
    "empty problem": ({"id": "x", "problem": "", "answer": "2"}, "'problem' is empty"),
    "duplicate id": (row(0), "duplicate id 'p0' (first on line 1)"),
    "non-UTF-8": (b'{"id": "x", "problem": "caf\xe9", "answer": "2"}', "not valid UTF-8"),
}


@pytest.mark.parametrize("kind", BAD_ROWS)
def test_bad_row_names_file_and_line(tmp_path, grader, kind):
    bad, message = BAD_ROWS[kind]
    path = write(tmp_path / "bad.jsonl", [row(0), row(1), bad, row(3)])
    with pytest.raises(DataError) as err:
        MathTask(path, path, grader=grader).train_problems(1, 1)
    assert f"{path}:3: " in str(err.value)
    assert message in str(err.value)
    assert "task.bad_rows=skip" in str(err.value)


def test_skip_bad_rows_counts_them(tmp_path, grader):
    lines = [row(0)] + [bad for bad, _ in BAD_ROWS.values()] + ["", "   ", row(1), "", ""]  # 2 empty rows
    path = write(tmp_path / "bad.jsonl", lines)
    task = MathTask(path, bad_rows="skip", grader=grader)
    assert [p.id for p in task.train_set] == ["p0", "p1"]
    assert task.bad_rows.skipped == len(BAD_ROWS) + 2  # blank lines after the last row are not rows


def test_missing_ids_and_numbers(tmp_path, grader):
    path = write(tmp_path / "t.jsonl", [{"problem": "2+2?", "answer": 4}, {"problem": "3+3?", "answer": "6"}])
    task = MathTask(path, path, grader=grader)
    assert [(p.id, p.answer) for p in task.train_set] == [("t.jsonl:1", "4"), ("t.jsonl:2", "6")]


def test_empty_file(tmp_path, grader):
    path = write(tmp_path / "empty.jsonl", [])
    with pytest.raises(DataError, match="no usable rows"):
        MathTask(path, grader=grader).train_problems(1, 1)


def test_hub_loading_fails_clearly_offline(monkeypatch, grader):
    task = MathTask(train_dataset="hacrl-test/no-such-dataset", grader=grader)
    if importlib.util.find_spec("datasets") is None:
        with pytest.raises(ImportError, match="pip install datasets"):
            task.train_problems(1, 1)
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
        with pytest.raises(DataError, match="no-such-dataset"):
            task.train_problems(1, 1)


# --- the shared benchmark files (skipped when absent) -------------------------------------------------------------


def test_shared_math_files(grader):
    task = MathTask(shared_file("math_train.jsonl"), shared_file("math500.jsonl"), seed=1, grader=grader)
    assert (len(task.train_set), len(task.eval_problems())) == (7500, 500)
    assert len(task.categories) == 7 and "Counting & Probability" in task.categories
    assert [p.id for p in task.train_problems(937, 8)] == [p.id for p in task.train_problems(937, 8)]
    assert task.eval_problems()[0].id == "test/precalculus/807.json"


def test_gold_solutions_grade_correct():
    """The gold solution text of the first 50 MATH-500 rows, graded by math-verify alone (no string fast path)."""
    with Grader(timeout_s=5.0) as g:
        task = MathTask(eval_path=shared_file("math500.jsonl"), eval_limit=50, grader=g)
        probs = task.eval_problems()
        grades = g.grade([p.solution for p in probs], [p.answer for p in probs])
    accuracy = sum(x.reward for x in grades) / len(grades)
    assert accuracy >= 0.98, [(p.answer, x.reason) for p, x in zip(probs, grades, strict=True) if not x.reward]
