"""benchmarks/grader_accuracy.py: scoring against labels, and the command on a small labelled set."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.grader_accuracy import load_set, score
from hacrl_exp.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def row(i: int, gold: str, response: str, label: int, kind: str, benchmark: str = "math500") -> dict:
    return {"id": f"r{i}", "benchmark": benchmark, "gold": gold, "response": response, "label": label, "kind": kind}


ROWS = [
    row(0, "\\frac{1}{2}", "so \\boxed{\\frac{1}{2}}", 1, "identical"),
    row(1, "\\frac{1}{2}", "so \\boxed{\\frac12}", 1, "equivalent"),
    row(2, "\\frac{1}{2}", "so \\boxed{\\frac{1}{3}}", 0, "near_miss", "gsm8k"),
    row(3, "82", "the answer is \\fbox{82}", 1, "malformed", "gsm8k"),
    row(4, "7", "no box at all: 7", 0, "malformed", "gsm8k"),
]


def test_score_counts_false_positives_and_negatives():
    result = score(ROWS, [1, 0, 1, 1, 0])
    assert result["accuracy"] == 3 / 5 and result["false_positives"] == 1 and result["false_negatives"] == 1
    assert result["by_kind"] == {"equivalent": 0.0, "identical": 1.0, "malformed": 1.0, "near_miss": 0.0}
    assert result["by_benchmark"] == {"gsm8k": 2 / 3, "math500": 0.5}


def test_load_set_names_the_bad_line(tmp_path):
    bad = tmp_path / "set.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({**ROWS[1], "label": 2}) + "\n")
    with pytest.raises(ConfigError, match=r"set.jsonl:2: label=2 must be 0 or 1"):
        load_set(bad)
    bad.write_text(json.dumps({k: v for k, v in ROWS[0].items() if k != "gold"}) + "\n")
    with pytest.raises(ConfigError, match=r"set.jsonl:1: field\(s\) \['gold'\] missing"):
        load_set(bad)


def test_command_grades_a_small_set(tmp_path):
    pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install -e .[lmeval])")
    labelled = tmp_path / "set.jsonl"
    labelled.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.grader_accuracy",
            "--set",
            str(labelled),
            "--out",
            str(out),
            "--show-errors",
            "lmeval_hendrycks",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert set(results) == {"ours", "math_verify_raw", "lmeval_minerva", "lmeval_hendrycks"}
    # hendrycks compares normalised strings: \frac12 is rewritten to \frac{1}{2}; remove_boxed asserts on \fbox
    assert results["lmeval_hendrycks"]["verdicts"] == [1, 1, 0, 0, 0]
    assert results["lmeval_hendrycks"]["raised"] == {"AssertionError": 1}
    assert results["ours"]["verdicts"] == [1, 1, 0, 1, 0]
    assert results["math_verify_raw"]["verdicts"][:3] == [1, 1, 0]
    for result in results.values():
        assert 0 <= result["accuracy"] <= 1 and result["answers_per_s"] > 0
    assert "| lmeval_hendrycks |" in proc.stdout and "- r3 [malformed] label 1, graded 0" in proc.stdout

    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.grader_accuracy", "--set", str(tmp_path / "nope.jsonl")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2 and "nope.jsonl' does not exist" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_outside_command_prints_the_table_and_every_disagreement(tmp_path):
    out = tmp_path / "outside.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.grader_accuracy", "--outside", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(out.read_text())["summary"]
    assert set(summary) == {"math-verify", "hendrycks-math", "nemo-skills"}
    assert all(s["false_positives"] == 0 and "unreviewed" not in s["disagreements"] for s in summary.values())
    disagreements = sum(s["cases"] - s["agree"] for s in summary.values())
    assert proc.stdout.count("\n- ") == disagreements > 0
    assert "| math-verify | 268 |" in proc.stdout and "[their setting we don't share]" in proc.stdout
