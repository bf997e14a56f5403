"""Bounded input, numbers at every command-line edge, and `${...}` errors (issue 40), through the real entry points
(`run_cli`: each `main(argv)` in this process). Every case is one stderr line naming the file:line and field, the
flag or the key, exit code 2, and no traceback. docs/reliability.md ("Bounded input, numbers, signals, messages,
sweeps") lists them with what happened before.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.e2e.tiny import tiny_overrides

ROW = {"problem": "What is $1+1$?", "answer": "2", "solution": "\\boxed{2}"}
BIG = 32 * 2**20  # a 32 MiB `problem`: over the 1 MiB row limit (the reported one was 240 MB)


def one_line(result, code: int = 2) -> str:
    """The single stderr line of a refused command (asserted: exit `code`, one line, no traceback)."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == code and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return lines[0]


def jsonl(path: Path, rows: list[dict | str]) -> Path:
    """Rows as JSONL (a str is written as it is: an oversized line is built without a 32 MiB dict)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def huge_problem_row() -> str:
    """A row whose `problem` is BIG characters, then `answer`: written as text, never parsed here."""
    return '{"id": "big", "problem": "' + "x" * BIG + '", "answer": "2"}'


def math_folder(folder: Path, train: list[dict | str]) -> Path:
    jsonl(folder / "math_train.jsonl", train)
    jsonl(folder / "math500.jsonl", [dict(ROW, id=f"e{i}") for i in range(4)])
    return folder


# --- A. bounded input ------------------------------------------------------------------------------------------


def test_a_huge_training_row_is_refused_in_a_second_naming_file_line_and_field(tmp_path):
    """Before: a 240 MB `problem` grew the run to 23.6 GB until the kernel killed it, no message. Now each line is
    read at most to its limit (1 MiB), so the check costs 1 MiB whatever the row holds."""
    data = math_folder(tmp_path / "data", [dict(ROW, id="a"), huge_problem_row(), dict(ROW, id="c")])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB: this process's high-water mark so far
    result = run_cli("hacrl_exp.run", [*tiny_overrides(), "task=math", f"task.data_dir={data}"], cwd=tmp_path)
    line = one_line(result)
    assert line.startswith(f"DataError: {data / 'math_train.jsonl'}:2: the row is over 1,048,576 bytes")
    assert "field 'problem'" in line and "HACRL_MAX_ROW_BYTES" in line
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak
    assert grown < 2**20, f"the peak grew {grown / 2**20:.1f} GiB"  # read whole, the row grew it by 5.9 GiB in 39 s
    assert not (tmp_path / "mlflow.db").exists()


def test_a_huge_field_and_a_huge_row_of_benchmark_data_are_one_line_in_grade(tmp_path):
    """Evaluation data (evaluation/data.py, through grade's `benchmark` + `id` rows) and grade's own input."""
    data = tmp_path / "data"
    jsonl(data / "math500.jsonl", [dict(ROW, id="a"), dict(ROW, id="b", problem="y" * 300_000)])
    rows = jsonl(tmp_path / "in.jsonl", [{"benchmark": "math500", "id": "a", "response": "\\boxed{2}"}])
    result = run_cli("hacrl_exp.grade", ["--in", rows, "--out", tmp_path / "out.jsonl", "--data-dir", data])
    line = one_line(result)
    assert f"{data / 'math500.jsonl'}:2: field 'problem' holds 300,000 characters, over the limit of 262,144" in line
    assert "HACRL_MAX_FIELD_CHARS" in line and not (tmp_path / "out.jsonl").exists()

    jsonl(rows, [{"gold": "2", "response": "\\boxed{2}"}, '{"gold": "2", "response": "' + "z" * BIG + '"}'])
    line = one_line(run_cli("hacrl_exp.grade", ["--in", rows, "--out", tmp_path / "out.jsonl"]))
    assert line.startswith(f"DataError: {rows}:2: the row is over 1,048,576 bytes (still inside field 'response'")
    assert "--max-row-bytes" in line
    wide = run_cli("hacrl_exp.grade", ["--in", rows, "--out", tmp_path / "out.jsonl", "--max-row-bytes", 2 * BIG])
    assert wide.returncode == 0, wide.stderr[-2000:]  # the limit is a setting: raised, the row is graded


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"HACRL_MAX_ROW_BYTES": "lots"}, "ConfigError: HACRL_MAX_ROW_BYTES='lots' is not an integer in [1024, "),
        ({"HACRL_MAX_FIELD_CHARS": "0"}, "ConfigError: HACRL_MAX_FIELD_CHARS='0' is not an integer in [1024, "),
    ],
)
def test_the_limits_environment_variables_are_checked(tmp_path, env, expected):
    data = math_folder(tmp_path / "data", [dict(ROW, id=str(i)) for i in range(8)])
    result = run_cli(
        "hacrl_exp.run", [*tiny_overrides(), "task=math", f"task.data_dir={data}"], cwd=tmp_path, env=os.environ | env
    )
    assert one_line(result).startswith(expected)


def test_the_memory_check_counts_the_data_rows(tmp_path):
    """A 1 TiB training file (sparse: nothing is read) is refused by the memory check before any row is read."""
    data = math_folder(tmp_path / "data", [dict(ROW, id="a")])
    os.truncate(data / "math_train.jsonl", 2**40)
    result = run_cli("hacrl_exp.run", [*tiny_overrides(), "task=math", f"task.data_dir={data}"], cwd=tmp_path)
    line = one_line(result)
    assert line.startswith("ConfigError: task.train_file=math_train.jsonl: the task's data rows take about 3072.0 GiB")
    assert "use a smaller file" in line


# --- B. numbers at every command-line edge -------------------------------------------------------------------------

GRADE = {  # flags: the line
    ("--timeout", "nan"): "ConfigError: --timeout=nan is not a finite number; allowed [0.1, 600.0]",
    ("--timeout", "inf"): "ConfigError: --timeout=inf is not a finite number; allowed [0.1, 600.0]",
    ("--timeout", "1e-300"): "ConfigError: --timeout=1e-300 is out of range; allowed [0.1, 600.0]",
    ("--timeout", "-1"): "ConfigError: --timeout=-1.0 is out of range; allowed [0.1, 600.0]",
    ("--workers", "0"): "ConfigError: --workers=0 is out of range; allowed [1, 64]",
    ("--workers", "100000"): "ConfigError: --workers=100000 is out of range; allowed [1, 64]",
    ("--max-row-bytes", "10"): "ConfigError: --max-row-bytes=10 is out of range; allowed [1024, 1073741824]",
}


@pytest.mark.parametrize("flag", GRADE, ids=" ".join)
def test_grade_numbers_are_finite_and_in_range(tmp_path, flag):
    """Before: --timeout nan / 1e-300 exited 0 with right answers graded as timeouts; inf: a traceback."""
    rows = jsonl(tmp_path / "in.jsonl", [{"gold": "2", "response": "\\boxed{2}"}])
    result = run_cli("hacrl_exp.grade", ["--in", rows, "--out", tmp_path / "out.jsonl", *flag])
    assert one_line(result) == GRADE[flag] and not (tmp_path / "out.jsonl").exists()


def test_grade_workers_are_capped_at_the_rows_and_warned_above_the_cores(tmp_path):
    """Before: 24 workers started for 3 rows, no word about the machine's cores."""
    rows = jsonl(tmp_path / "in.jsonl", [{"gold": str(i), "response": f"\\boxed{{{i}}}"} for i in range(3)])
    many = (os.cpu_count() or 1) + 1
    result = run_cli("hacrl_exp.grade", ["--in", rows, "--out", tmp_path / "out.jsonl", "--workers", many])
    assert result.returncode == 0 and "accuracy 1.0000" in result.stdout, result.stderr
    assert f"warning: --workers={many} is above this machine's {os.cpu_count()} cores" in result.stderr
    from hacrl_exp.config.flags import worker_count

    assert worker_count("--workers", 24, 3) == 3 and worker_count("--workers", 2, 0) == 1


UI = {
    ("--port", "0"): "ConfigError: --port=0 is out of range; allowed [1024, 65535]",
    ("--port", "70000"): "ConfigError: --port=70000 is out of range; allowed [1024, 65535]",
    ("--port", "65535"): "ConfigError: --reports-port=65536 is out of range; allowed [1024, 65535]",
    ("--reports-port", "-1"): "ConfigError: --reports-port=-1 is out of range; allowed [1024, 65535]",
    ("--port", "5050", "--reports-port", "5050"): "ConfigError: --reports-port 5050 is --port too; give the reports",
}


@pytest.mark.parametrize("flags", UI, ids=" ".join)
def test_ui_ports_are_checked_before_anything_starts(tmp_path, flags):
    """Before: --port 0 waited 180 s for a server no link could name; 70000 was a traceback."""
    (tmp_path / "reports").mkdir()
    store = tmp_path / "mlflow.db"
    store.write_bytes(b"")
    started = time.monotonic()
    result = run_cli("hacrl_exp.ui", ["--store", f"sqlite:///{store}", "--reports", tmp_path / "reports", *flags])
    assert one_line(result).startswith(UI[flags]) and time.monotonic() - started < 5


def test_threads_above_the_cores_warn_and_absurd_counts_are_refused(tmp_path):
    """Before: trainer.threads=4096 on 2 cores ran 400× slower, no warning."""
    cores = os.cpu_count() or 1
    absurd = 8 * cores + 1
    for module, key in [("hacrl_exp.run", "trainer.threads"), ("hacrl_exp.plan", "trainer.threads")]:
        line = one_line(run_cli(module, [*tiny_overrides(), f"{key}={absurd}"], cwd=tmp_path))
        assert line.startswith(f"ConfigError: {key}={absurd} is more than 8× this machine's {cores} cores")
    line = one_line(run_cli("hacrl_exp.evaluate", [f"threads={absurd}", "checkpoints=[x]"], cwd=tmp_path))
    assert line.startswith(f"ConfigError: threads={absurd} is more than 8× this machine's {cores} cores")
    line = one_line(run_cli("hacrl_exp.rehearse", [f"rehearsal.threads={absurd}"], cwd=tmp_path))
    assert line.startswith(f"ConfigError: rehearsal.threads={absurd} is more than 8×")
    above = [*tiny_overrides(), f"trainer.threads={cores + 1}", "--cfg", "job"]
    printed = run_cli("hacrl_exp.run", above, cwd=tmp_path)
    assert printed.returncode == 0 and printed.stderr.count(f"warning: trainer.threads={cores + 1} is above") == 1


OTHER_FLAGS = {
    ("hacrl_exp.evaluation.gold", "--timeout", "nan"): "ConfigError: --timeout=nan is not a finite number",
    ("hacrl_exp.evaluation.gold", "--workers", "0"): "ConfigError: --workers=0 is out of range; allowed [1, 64]",
    ("hacrl_exp.evaluation.gold", "--show", "-1"): "ConfigError: --show=-1 is out of range",
    ("hacrl_exp.evaluation.lmeval", "--max-gen-toks", "0"): "ConfigError: --max-gen-toks=0 is out of range",
    ("hacrl_exp.report.rederive", "--seed", "-1"): "ConfigError: --seed=-1 is out of range; allowed [0, 4294967295]",
    ("hacrl_exp.report.rederive", "--power-draws", "-5"): "ConfigError: --power-draws=-5 is out of range",
    ("hacrl_exp.theory", "--seed", "-1"): "ConfigError: --seed=-1 is out of range; allowed [0, 4294967295]",
}


@pytest.mark.parametrize("case", OTHER_FLAGS, ids=" ".join)
def test_the_other_numeric_flags_are_in_range(tmp_path, case):
    module, *flags = case
    extra = {"hacrl_exp.report.rederive": [tmp_path], "hacrl_exp.evaluation.lmeval": ["--data-dir", tmp_path]}
    result = run_cli(module, [*extra.get(module, []), *flags], cwd=tmp_path)
    assert one_line(result).startswith(OTHER_FLAGS[case])


SWEEPER = {
    "hydra.sweeper.alpha.high=inf": "ConfigError: hydra.sweeper.alpha.high=inf is not a finite number; allowed [0, ",
    "hydra.sweeper.alpha.choices=[1.0,nan]": "ConfigError: hydra.sweeper.alpha.choices[1]=nan is not a finite",
    "hydra.sweeper.n_trials=1000000000": "ConfigError: hydra.sweeper.n_trials=1000000000 is out of range",
    "hydra.sweeper.n_jobs=0": "ConfigError: hydra.sweeper.n_jobs=0 is out of range; allowed [1, 1024]",
    "hydra.sweeper.sampler.seed=-1": "ConfigError: hydra.sweeper.sampler.seed=-1 is out of range",
}


@pytest.mark.parametrize("override", SWEEPER)
def test_sweeper_numbers_are_finite_and_in_range(tmp_path, override):
    """Before: alpha.high=inf and a NaN choice passed, a negative seed was a numpy traceback, n_trials unbounded."""
    args = ["-m", "+hparams_search=alpha_pair", *tiny_overrides("pair", steps=1), f"hydra.sweep.dir={tmp_path}/s"]
    args.append("tracking.backend=none")  # no MLflow store to create: the settings are what is checked
    result = run_cli("hacrl_exp.run", [*args, override], cwd=tmp_path)
    lines = [line for line in result.stderr.splitlines() if line.startswith("ConfigError")]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines and lines[-1].startswith(SWEEPER[override])


# --- D. interpolation errors ---------------------------------------------------------------------------------------

INTERPOLATIONS = {  # case: (value, what the line says after the key)
    "missing key": ("${nope.key}", "Interpolation key 'nope.key' not found; point the interpolation at an existing"),
    "missing env var": ("${oc.env:HACRL_NOPE}", "environment variable HACRL_NOPE is not set; export it, or give a"),
    "recursive": ("${KEY}", "the interpolation refers back to itself (a cycle of ${...}); give one of the keys a"),
}
APPS = {  # entry point: (a string key, arguments it needs)
    "hacrl_exp.run": ("trainer.output_dir", tiny_overrides()),
    "hacrl_exp.plan": ("trainer.output_dir", []),
    "hacrl_exp.rehearse": ("trainer.output_dir", []),
    "hacrl_exp.evaluate": ("output_dir", ["checkpoints=[x]"]),
    "hacrl_exp.report": ("output_root", []),
}


@pytest.mark.parametrize("case", INTERPOLATIONS)
@pytest.mark.parametrize("app", APPS)
def test_interpolation_errors_are_one_line_naming_the_key(tmp_path, app, case):
    """Before: 95-242 lines of traceback, exit 1."""
    key, args = APPS[app]
    value, said = INTERPOLATIONS[case]
    value = value.replace("KEY", key)
    result = run_cli(app, [*args, f"{key}={value}"], cwd=tmp_path)
    assert one_line(result) == f"ConfigError: {key}: {said}" + one_line(result).split(said, 1)[1]
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("hydra.run.dir=${oc.env:HACRL_NOPE}", "ConfigError: hydra.run.dir=${oc.env:HACRL_NOPE}: environment variable"),
        ("hydra.job.name=${nope}", "ConfigError: hydra.job.name=${nope}: Interpolation key 'nope' not found"),
    ],
)
@pytest.mark.parametrize("app", ["hacrl_exp.run", "hacrl_exp.evaluate", "hacrl_exp.report"])
def test_interpolation_errors_in_hydras_own_keys_are_one_line(tmp_path, app, override, said):
    """Before: Hydra's traceback (exit 1) after `mlflow.db` was created; now before anything."""
    args = {"hacrl_exp.run": tiny_overrides(), "hacrl_exp.evaluate": ["checkpoints=[x]"]}.get(app, [])
    assert one_line(run_cli(app, [*args, override, "--cfg", "job"], cwd=tmp_path)).startswith(said)
    assert not (tmp_path / "mlflow.db").exists()


def test_bad_grammar_in_a_preset_is_one_line_naming_the_key(tmp_path):
    """`${foo` on the command line was already refused by Hydra's parser; in a --config-dir preset too, now."""
    presets = tmp_path / "presets" / "experiment"
    presets.mkdir(parents=True)
    (presets / "bad.yaml").write_text("# @package _global_\ntrainer:\n  output_dir: out_${foo\n")
    args = ["--config-dir", tmp_path / "presets", *tiny_overrides(), "+experiment=bad"]
    line = one_line(run_cli("hacrl_exp.run", args, cwd=tmp_path))
    assert line.startswith("ConfigError: trainer.output_dir: cannot parse the interpolation")


def test_under_skip_an_oversized_row_is_counted_and_the_rest_load(tmp_path):
    """task.bad_rows=skip: a row over a limit is dropped and counted by its reason; the rows after it load."""
    from hacrl_exp.tasks.math import MathTask

    rows = [dict(ROW, id="a"), huge_problem_row(), dict(ROW, id="c", problem="y" * 300_000), dict(ROW, id="d")]
    train = jsonl(tmp_path / "train.jsonl", rows)
    task = MathTask(train, train, bad_rows="skip")
    try:
        assert [p.id for p in task.train_set] == ["a", "d"]
        assert dict(task.bad_rows.counts) == {"row_too_large": 1, "field_too_large": 1}
    finally:
        task.close()
