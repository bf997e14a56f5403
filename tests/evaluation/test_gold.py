"""Gold agreement on slices of the real data (skips without it), and the CLI's exit codes."""

from __future__ import annotations

import pytest

from hacrl_exp.evaluation.data import load_problems
from hacrl_exp.evaluation.gold import check_gold, gold_benchmarks, main
from hacrl_exp.evaluation.spec import load_benchmark


def test_gold_blocks():
    assert {"math500", "math", "gsm8k", "minerva", "olympiadbench", "arithmetic"} <= set(gold_benchmarks())
    assert load_benchmark("aime2025").gold is None and load_benchmark("amc23").gold is None  # no solutions
    assert load_benchmark("olympiadbench").gold.threshold == 0.95 and load_benchmark("math").gold.threshold == 0.99


@pytest.mark.parametrize("name, limit", [("math500", 40), ("math", 40), ("gsm8k", 60), ("minerva", 30)])
def test_boxed_and_gsm8k_slices_agree_fully(data_dir, grader, name, limit):
    spec = load_benchmark(name)
    report = check_gold(spec, load_problems(spec, data_dir, limit), grader)
    assert report.rows == limit and report.agreed == limit and report.passed, report.disagreements


def test_olympiadbench_rows_that_need_benchmark_specific_extraction(data_dir, grader):
    """Rows whose gold text states the answer in a form only the statement extractor reads: bold digits with a
    thousands comma, percent, several values in one sentence, an inequality for an interval, tuples in a set."""
    wanted = {
        "olympiadbench-3077",
        "olympiadbench-2255",
        "olympiadbench-2340",
        "olympiadbench-2243",
        "olympiadbench-2313",
        "olympiadbench-1618",
        "olympiadbench-2254",
    }
    spec = load_benchmark("olympiadbench")
    rows = [p for p in load_problems(spec, data_dir) if p.id in wanted]
    report = check_gold(spec, rows, grader)
    assert report.rows == len(wanted) and report.agreed == len(wanted), report.disagreements


def test_cli_exit_codes(data_dir, capsys):
    assert (
        main(["--data-dir", str(data_dir), "--benchmarks", "math500", "gsm8k", "--limit", "10", "--workers", "1"]) == 0
    )
    out = capsys.readouterr().out
    assert "| math500 | 10 | 10 | 100.00% | 0 (100.00%) | 99% | 3/3 | pass |" in out
    with pytest.raises(SystemExit) as err:
        main(["--data-dir", str(data_dir), "--benchmarks", "aime2025"])
    assert err.value.code == 2 and "has no gold block" in capsys.readouterr().err
