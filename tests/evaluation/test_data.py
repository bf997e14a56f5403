"""Loading benchmark rows: local JSONL with limits, the embedded tiers, and every kind of bad input (one line)."""

from __future__ import annotations

import json

import pytest

from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.data import load_problems
from hacrl_exp.evaluation.spec import load_benchmark
from hacrl_exp.tasks.math import DataError


def write(folder, name, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return folder


def test_local_rows_prompt_and_limit(tmp_path):
    rows = [
        {"id": f"q{i}", "problem": f"What is {i}+{i}?", "answer": str(2 * i), "subject": "Algebra"} for i in range(5)
    ]
    folder = write(tmp_path, "math500.jsonl", rows)
    problems = load_problems(load_benchmark("math500"), folder, limit=3)
    assert [p.id for p in problems] == ["q0", "q1", "q2"]
    assert problems[1].prompt.startswith("What is 1+1? Let's think step by step") and problems[1].answer == "2"
    assert problems[1].category == "Algebra" and problems[1].meta["problem_text"] == "What is 1+1?"


def test_env_var_is_the_default_folder(tmp_path, monkeypatch):
    folder = write(tmp_path, "amc23.jsonl", [{"id": "a", "problem": "p", "answer": 27}])
    monkeypatch.setenv("HACRL_DATA_DIR", str(folder))
    (problem,) = load_problems(load_benchmark("amc23"))
    assert problem.answer == "27"


def test_olympiad_answers_are_cleaned(tmp_path):
    folder = write(tmp_path, "olympiadbench.jsonl", [{"id": "o", "problem": "p", "answer": "8$,$4", "solution": "s"}])
    assert load_problems(load_benchmark("olympiadbench"), folder)[0].answer == "8,4"


def test_embedded_arithmetic_takes_turns_across_tiers():
    spec = load_benchmark("arithmetic")
    problems = load_problems(spec, limit=6)
    assert [p.category for p in problems] == list(spec.embedded["tiers"])
    assert problems[0].prompt.endswith("=") and problems[0].solution.endswith("|" + problems[0].answer)
    assert len(load_problems(spec)) == 600


@pytest.mark.parametrize(
    "rows, needle",
    [
        (['{"id": "a", "problem": "p", "answer": "1"}', "{not json"], "math500.jsonl:2: invalid JSON"),
        ([{"id": "a", "problem": "p"}], "math500.jsonl:1: field 'answer' is missing"),
        ([{"id": "a", "problem": "", "answer": "1"}], "math500.jsonl:1: field 'problem' is empty"),
        ([{"id": "a", "problem": "p", "answer": "1"}, {"id": "a", "problem": "q", "answer": "2"}], "duplicate id 'a'"),
        (["[1, 2]"], "math500.jsonl:1: a JSON list, not an object"),
        ([""], "no usable rows"),
    ],
)
def test_malformed_rows_name_benchmark_file_and_line(tmp_path, rows, needle):
    folder = write(tmp_path, "math500.jsonl", rows)
    with pytest.raises(DataError) as err:
        load_problems(load_benchmark("math500"), folder)
    message = str(err.value)
    assert message.startswith("benchmark math500:") and needle in message and "\n" not in message


def test_missing_folder_and_file(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="data_dir='.*nowhere' is not a folder"):
        load_problems(load_benchmark("math500"), tmp_path / "nowhere")
    with pytest.raises(DataError, match=r"benchmark gsm8k: .*gsm8k_test.jsonl does not exist"):
        load_problems(load_benchmark("gsm8k"), tmp_path)
    monkeypatch.delenv("HACRL_DATA_DIR", raising=False)
    with pytest.raises(ConfigError, match="benchmark minerva: no data folder"):
        load_problems(load_benchmark("minerva"), source="local")


def test_hugging_face_path_fails_clearly_offline(monkeypatch):
    monkeypatch.delenv("HACRL_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataError) as err:
        load_problems(load_benchmark("math500"), limit=2)  # auto: no folder -> the hub
    message = str(err.value)
    assert "HuggingFaceH4/MATH-500" in message and ("datasets" in message or "Offline?" in message)


def test_real_files_load(data_dir):
    sizes = {
        "math500": 500,
        "math": 5000,
        "gsm8k": 1319,
        "aime2025": 30,
        "amc23": 40,
        "minerva": 272,
        "olympiadbench": 675,
    }
    for name, size in sizes.items():
        assert len(load_problems(load_benchmark(name), data_dir)) == size, name
    gsm = load_problems(load_benchmark("gsm8k"), data_dir, limit=1)[0]
    assert gsm.answer == "18" and gsm.meta["answer_raw"] == "18"
