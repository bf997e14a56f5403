"""The one data-folder rule and the one row → Problem loader, shared by the training task and the benchmarks."""

from __future__ import annotations

import json

import pytest

from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.data import load_problems
from hacrl_exp.evaluation.spec import load_benchmark
from hacrl_exp.tasks.math import MathTask
from hacrl_exp.tasks.problem_data import DATA_DIR_ENV, data_folder, resolve_data_path


def write(path, rows: list[dict]):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def files(tmp_path):
    rows = [{"id": f"p{i}", "problem": f"What is {i}+{i}?", "answer": str(2 * i)} for i in range(3)]
    return write(tmp_path / "train.jsonl", rows), write(tmp_path / "eval.jsonl", rows)


def test_resolve_data_path(files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path.parent)
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match=DATA_DIR_ENV):
        resolve_data_path("train.jsonl")
    with pytest.raises(FileNotFoundError, match=f"uses \\${DATA_DIR_ENV}, which is not set"):
        resolve_data_path(f"${{{DATA_DIR_ENV}}}/train.jsonl")
    assert resolve_data_path("train", data_dir=tmp_path) == files[0].resolve()
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert resolve_data_path("train.jsonl") == files[0].resolve()
    assert resolve_data_path(f"${DATA_DIR_ENV}/eval.jsonl") == files[1]
    with pytest.raises(FileNotFoundError, match="nor in"):
        resolve_data_path("nope.jsonl")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_data_path(tmp_path / "nope.jsonl")


def test_one_folder_rule_whose_error_names_the_key(tmp_path, monkeypatch):
    """data_dir, else $HACRL_DATA_DIR, else none; a folder that is not there is one line naming who gave it."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert data_folder(None) is None and data_folder("") is None and data_folder(tmp_path) == tmp_path
    with pytest.raises(ConfigError, match=r"^task\.data_dir='.*nowhere' is not a folder\. Point it at the folder"):
        resolve_data_path("train.jsonl", tmp_path / "nowhere", key="task.data_dir")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert data_folder(None) == tmp_path
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "gone"))
    with pytest.raises(ConfigError, match=f"^{DATA_DIR_ENV}='.*gone' is not a folder") as err:
        data_folder(None)
    assert "\n" not in str(err.value)


def test_the_task_and_a_benchmark_read_a_row_alike(tmp_path, grader):
    """The same MATH-500 row, read by the training task and by the math500 benchmark: the same Problem."""
    row = {"id": "a", "problem": "Half of 4?", "answer": "\\frac{4}{2}", "solution": "\\boxed{2}",
           "subject": "Algebra", "level": 2}  # fmt: skip
    path = write(tmp_path / "math500.jsonl", [row])
    (from_benchmark,) = load_problems(load_benchmark("math500"), tmp_path)
    (from_task,) = MathTask(path, path, grader=grader).train_set
    assert from_task == from_benchmark and from_task.category == "Algebra"
    meta = {"level": 2, "answer_raw": "\\frac{4}{2}", "problem_text": "Half of 4?"}
    assert from_task.meta == from_benchmark.meta == meta
