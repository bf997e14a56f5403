"""`python -m hacrl_exp.grade`: grade a JSONL of outputs or re-grade a samples.parquet, with the one grader."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from hacrl_exp.grade import main
from tests.cli import run_cli

ROWS = [
    {"gold": "4.5e33", "response": "so \\boxed{4.5 \\times 10^{33}\\ \\text{erg}}"},
    {"gold": "\\frac{14}{3}", "question": "Express it as a common fraction.", "response": "\\boxed{4.\\overline{6}}"},
    {"gold": "(3,4]", "response": "\\boxed{3 < x \\le 4}"},
    {"gold": "1", "response": "no box"},
    {"gold": "605", "benchmark": "arithmetic", "response": "1+5+0=06,4+6+0=10,1+3+1=05|605"},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_jsonl_rows_keep_their_order_and_fields(tmp_path, capsys):
    write_jsonl(tmp_path / "in.jsonl", ROWS)
    assert main(["--in", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "out.jsonl")]) == 0
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["response"] for r in out] == [r["response"] for r in ROWS]
    assert [r["reward"] for r in out] == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert [r["reason"] for r in out] == ["correct", "wrong", "correct", "no_answer", "correct"]
    assert out[0]["extracted"] == "4.5 \\times 10^{33}\\ \\text{erg}" and out[4]["extracted"] == "605"
    assert "accuracy 0.6000" in capsys.readouterr().out


def test_forms_flag_picks_the_policy_and_both_accuracies_are_printed(tmp_path, capsys):
    write_jsonl(tmp_path / "in.jsonl", ROWS)
    out_path = tmp_path / "out.jsonl"
    assert main(["--in", str(tmp_path / "in.jsonl"), "--out", str(out_path), "--forms", "value"]) == 0
    out = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert [r["reward"] for r in out] == [1.0, 1.0, 1.0, 0.0, 1.0]  # 4.6̅ for 14/3: right value, form not asked for
    assert [r["reward_forms_requested"] for r in out] == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert {r["grader_forms"] for r in out} == {"value"} and out[1]["reason"] == "correct"
    printed = capsys.readouterr().out
    assert "under grader forms=value: accuracy 0.8000" in printed and "under forms=requested: 0.6000" in printed
    with pytest.raises(SystemExit) as stop:
        main(["--in", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "o.jsonl"), "--forms", "values"])
    assert stop.value.code == 2 and not (tmp_path / "o.jsonl").exists()


def test_benchmark_and_id_rows_use_the_benchmark_data(tmp_path, data_dir):
    rows = [
        {"benchmark": "minerva", "id": "minerva-0", "response": "\\boxed{1.6\\ \\text{cm}}"},
        {"benchmark": "gsm8k", "id": "gsm8k-test-0", "response": "#### 18"},  # no box: no answer
        {"benchmark": "gsm8k", "id": "gsm8k-test-0", "response": "\\boxed{\\$18}"},
    ]
    write_jsonl(tmp_path / "in.jsonl", rows)
    code = main(["--in", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "o.jsonl"), "--data-dir", str(data_dir)])
    assert code == 0
    out = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in out] == ["correct", "no_answer", "correct"]


def test_regrades_a_samples_parquet(tmp_path, capsys):
    """An evaluation's samples, graded by an older grader (which read Minerva's 4.5e33 as 4.5·e·33)."""
    frame = pd.DataFrame(
        {
            "benchmark": ["minerva", "minerva"],
            "problem_id": ["minerva-4", "minerva-5"],
            "response": ["\\boxed{4.5 \\times 10^{33}}", "\\boxed{7}"],
            "extracted": ["4.5 \\times 10^{33}", "7"],
            "answer": ["4.5e33", "8"],
            "reward": [0.0, 0.0],
            "reason": ["wrong", "wrong"],
        }
    )
    frame.to_parquet(tmp_path / "samples.parquet", index=False)
    assert main(["--in", str(tmp_path / "samples.parquet"), "--out", str(tmp_path / "regraded.parquet")]) == 0
    again = pd.read_parquet(tmp_path / "regraded.parquet")
    assert again["reward"].tolist() == [1.0, 0.0]
    policy = ["grader_forms", "reward_forms_requested", "reward_forms_value"]  # the policy named, both rewards
    assert list(again.columns) == list(frame.columns) + policy and set(again["grader_forms"]) == {"requested"}
    assert "1 verdicts differ" in capsys.readouterr().out


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"gold": "1", "response": "\\\\boxed{1}"}\nnot json\n', "in.jsonl:2: invalid JSON"),
        ('{"gold": "1"}\n', "in.jsonl:1: field 'response' is missing"),
        ('{"response": "\\\\boxed{1}"}\n', "in.jsonl:1: give either 'gold'"),
        ('{"benchmark": "mathh", "gold": "1", "response": "x"}\n', "in.jsonl:1: benchmark 'mathh' is unknown"),
    ],
)
def test_bad_rows_are_one_line_exit_2_and_nothing_written(tmp_path, content, message):
    (tmp_path / "in.jsonl").write_text(content)
    done = run_cli("hacrl_exp.grade", ["--in", tmp_path / "in.jsonl", "--out", tmp_path / "o"])
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_python_m_grade_prints_one_line_and_exits_2(tmp_path):
    """The `python -m` wiring in a real interpreter (the cases above run main in this process)."""
    (tmp_path / "in.jsonl").write_text("not json\n")
    arguments = ["--in", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "o")]
    done = subprocess.run([sys.executable, "-m", "hacrl_exp.grade", *arguments], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("DataError: ") and "in.jsonl:1: invalid JSON" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists(), done.stderr


def test_unknown_id_names_its_line(tmp_path, data_dir):
    write_jsonl(tmp_path / "in.jsonl", [{"benchmark": "amc23", "id": "amc23-999", "response": "\\boxed{1}"}])
    with pytest.raises(SystemExit) as stop:
        main(["--in", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "o.jsonl"), "--data-dir", str(data_dir)])
    assert stop.value.code == 2 and not (tmp_path / "o.jsonl").exists()
