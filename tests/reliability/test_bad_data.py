"""Bad data rows: malformed JSON, an empty row, a missing or empty field, non-UTF-8 bytes, a duplicate id. Under
task.bad_rows=error loading stops with one line naming file:line; under skip the row is counted by reason and the
count is reported in the run (metrics train/skipped_rows*, MLflow, the log). Training data (MathTask) and benchmark
data (evaluation.load_problems) go through the same row validation (hacrl_exp.tasks.rows)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from hacrl_exp.evaluation.data import load_problems
from hacrl_exp.evaluation.spec import load_benchmark
from hacrl_exp.rewards import Grader
from hacrl_exp.tasks.math import MathTask
from hacrl_exp.tasks.rows import DataError, skipped_row_metrics
from hacrl_exp.trainer.validate import preflight
from tests.cli import run_cli
from tests.e2e.tiny import tiny_overrides


def row(i: int, **kw) -> dict:
    return {
        "id": f"p{i}",
        "problem": f"What is {i}+{i}?",
        "answer": str(2 * i),
        "solution": f"\\boxed{{{2 * i}}}",
        **kw,
    }


BAD = {  # kind: (line 3 of the file, reason it is counted under)
    "malformed JSON": (b'{"id": "x", "problem": "1+1?", "answer": "2"', "invalid_json"),
    "not an object": (b'["1+1?", "2"]', "not_an_object"),
    "empty row {}": (b"{}", "empty_row"),
    "blank line between rows": (b"   ", "empty_row"),
    "missing field": (json.dumps({"id": "x", "problem": "1+1?"}).encode(), "missing_field"),
    "empty field": (json.dumps({"id": "x", "problem": " ", "answer": "2"}).encode(), "empty_field"),
    "non-UTF-8 bytes": (b'{"id": "x", "problem": "caf\xe9?", "answer": "2"}', "not_utf8"),
    "duplicate id": (json.dumps(row(0)).encode(), "duplicate_id"),
    "lone surrogate": (b'{"id": "x", "problem": "1+1? \\ud800", "answer": "2"}', "not_utf8"),
    "NaN gold answer": (b'{"id": "x", "problem": "1+1?", "answer": NaN}', "not_finite"),
    "gold answer 1e400": (b'{"id": "x", "problem": "1+1?", "answer": 1e400}', "not_finite"),
}


def write(path: Path, bad: bytes | None = None, good: int = 4) -> Path:
    """`good` rows, with `bad` as line 3, and a trailing blank line (not a row)."""
    lines = [json.dumps(row(i)).encode() for i in range(good)]
    if bad is not None:
        lines.insert(2, bad)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines) + b"\n\n")
    return path


@pytest.fixture(scope="module")
def grader():
    with Grader(timeout_s=5.0) as g:  # never started: loading data does not grade
        yield g


def load_task(path: Path, policy: str, grader) -> tuple[list[str], MathTask]:
    """Ids of the training rows kept, and the task (its bad-row counts)."""
    task = MathTask(path, path, bad_rows=policy, grader=grader)
    return [p.id for p in task.train_set], task


def load_benchmark_rows(path: Path, policy: str, grader) -> tuple[list[str], None]:
    return [p.id for p in load_problems(load_benchmark("math500"), path.parent, bad_rows=policy)], None


LOADERS = {"training task": ("train.jsonl", load_task), "benchmark": ("math500.jsonl", load_benchmark_rows)}


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("kind", BAD)
def test_error_names_file_and_line(tmp_path, grader, loader, kind):
    name, load = LOADERS[loader]
    path = write(tmp_path / name, BAD[kind][0])
    with pytest.raises(DataError) as info:
        load(path, "error", grader)
    message = str(info.value)
    assert f"{path}:3: " in message and "\n" not in message and info.value.reason == BAD[kind][1]


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("kind", BAD)
def test_skip_counts_by_reason(tmp_path, grader, loader, kind, caplog):
    name, load = LOADERS[loader]
    path = write(tmp_path / name, BAD[kind][0])
    with caplog.at_level(logging.WARNING, logger="hacrl_exp.tasks.rows"):
        ids, task = load(path, "skip", grader)
    assert len(ids) == 4 and len(set(ids)) == 4  # every good row kept, the bad one dropped
    assert f"skipped 1 bad rows ({BAD[kind][1]} 1)" in caplog.text and f"{path}:3" in caplog.text
    if task is not None:
        reason = BAD[kind][1]
        assert skipped_row_metrics(task) == {"train/skipped_rows": 1.0, f"train/skipped_rows/{reason}": 1.0}


def test_a_whole_file_in_another_encoding_and_an_empty_file(tmp_path, grader):
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(json.dumps(row(1)).encode() + b"\n" + '{"problem": "Café?", "answer": "1"}\n'.encode("latin-1"))
    with pytest.raises(DataError, match=f"{latin1}:2: not valid UTF-8"):
        load_task(latin1, "error", grader)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    for policy in ("error", "skip"):
        with pytest.raises(DataError, match="no usable rows"):
            load_task(empty, policy, grader)
    only_bad = write(tmp_path / "bad.jsonl", b"{nope", good=0)
    with pytest.raises(DataError, match="no usable rows"):  # skipping everything is not a data set
        load_task(only_bad, "skip", grader)


MATH_RUN = [
    "task=math",
    "task.eval_limit=2",
    "task.max_prompt_tokens=64",
    "rollout.max_new_tokens=8",
    "trainer.eval_limit=2",
    "trainer.prompts_per_step=2",
    *[f"agents.members.{n}.warm_start.steps=0" for n in ("opt_char", "gpt2_bpe")],
    *[f"agents.members.{n}.model.max_positions=96" for n in ("opt_char", "gpt2_bpe")],
    "agents.members.gpt2_bpe.tokenizer.vocab_size=120",
]


def math_data(folder: Path) -> Path:
    write(folder / "math_train.jsonl", BAD["duplicate id"][0], good=6)
    write(folder / "math500.jsonl", BAD["malformed JSON"][0], good=3)
    return folder


def test_cli_error_mode_is_one_line_naming_file_and_line(tmp_path):
    data = math_data(tmp_path / "data")
    command = [*tiny_overrides("pair", 1), *MATH_RUN, f"task.data_dir={data}"]
    command += ["tracking.backend=none", f"hydra.run.dir={tmp_path / 'run'}"]
    result = run_cli("hacrl_exp.run", command, cwd=tmp_path)
    lines = [x for x in result.stderr.splitlines() if x.strip() and "WARNING" not in x]
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith(("DataError: ", "ConfigError: "))
    assert f"{data / 'math_train.jsonl'}:3: duplicate id 'p0'" in lines[0]
    assert "task.bad_rows=skip" in lines[0] and "Traceback" not in result.stderr


def test_skip_mode_reports_the_count_in_the_run(tmp_path, caplog):
    import mlflow

    from hacrl_exp.trainer.loop import train
    from hacrl_exp.trainer.metrics import read_metrics

    data = math_data(tmp_path / "data")
    config = preflight([*tiny_overrides("pair", 1), *MATH_RUN, f"task.data_dir={data}", "task.bad_rows=skip"])
    with caplog.at_level(logging.WARNING, logger="hacrl_exp.tasks.rows"):
        summary = train(config, tmp_path / "run")
    assert summary["last_step"] == 1
    want = {"train/skipped_rows": 2.0, "train/skipped_rows/duplicate_id": 1.0, "train/skipped_rows/invalid_json": 1.0}
    rows = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "train/skipped_rows" in r]
    assert rows == [{"step": 0, "agent": "", **want}]
    assert mlflow.MlflowClient().get_run(summary["run_ids"][""]).data.metrics.items() >= want.items()
    assert "math_train.jsonl: skipped 1 bad rows (duplicate_id 1)" in caplog.text
    assert "math500.jsonl: skipped 1 bad rows (invalid_json 1)" in caplog.text
