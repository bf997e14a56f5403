"""A disk that fills up, for real: a small tmpfs holds the run folder or the MLflow store, and a filler file takes its
free space at a chosen moment (tests/reliability/filesystems.py; the tests skip where tmpfs cannot be mounted).

Whatever fills up, the run stops with one line naming the path and the free bytes (or, for the store, goes on and
says so once), the MLflow runs say what happened (FAILED, not RUNNING), the last checkpoint stays intact, and a
resume after space is freed is exact. docs/reliability.md ("Paths, resume, signals") lists the cases.
"""

from __future__ import annotations

import errno
import logging
import shutil
from pathlib import Path

import pytest

from hacrl_exp.agents.manifest import checkpoint_problem
from hacrl_exp.crash_drill import deterministic, mlflow_histories
from hacrl_exp.errors import OutputError
from hacrl_exp.paths import output_error
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import read_metrics
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides
from tests.reliability.filesystems import fill, free_bytes, make_read_only, tmpfs, umount
from tests.reliability.hooks import on_step_start

STEPS = 3
OVERRIDES = [*tiny_overrides("pair", STEPS), "trainer.checkpoint_every=1", "tracking.log_models=false"]


def config(store: str, *extra: str):
    return preflight([*OVERRIDES, f"tracking.uri={store}", "tracking.experiment=disk", *extra])


def test_a_full_disk_at_a_checkpoint_is_one_line_the_runs_failed_and_the_resume_exact(tmp_path, monkeypatch):
    """Case 8c: the disk holding the run folder fills up after checkpoint 1. Before: `RuntimeError: unexpected pos 704
    vs 598` (torch), naming neither the file nor the disk, runs left RUNNING. Now checkpoint 2 is refused before any
    of its files is written: the free bytes against the size of checkpoint 1."""
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with tmpfs(tmp_path / "disk", 8 * 1024) as disk:
        run, fillers = disk / "run", []
        on_step_start(monkeypatch, lambda step: step == 2 and fillers.append(fill(disk, leave=200_000)))
        with pytest.raises(OutputError) as info:
            train(config(store), run)
        message, last = str(info.value), run / "checkpoints" / "step_000001"
        size = sum(f.stat().st_size for f in last.rglob("*") if f.is_file())
        assert (
            message.startswith(f"disk full: {run / 'checkpoints'} has ") and "bytes free, checkpoint 2 (the " in message
        )
        assert message.endswith(f"needs about {size}; free space, then resume with trainer.resume={run}"), message
        assert {r["status"] for r in mlflow_histories(store, "disk").values()} == {"FAILED"}
        assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["latest", "step_000001"]
        assert checkpoint_problem(run / "checkpoints" / "step_000001") is None
        monkeypatch.undo()
        fillers[0].unlink()  # space freed: the run goes on from checkpoint 1
        summary = train(config(store, f"trainer.resume={run}"), run)
        assert summary["last_step"] == STEPS and summary["steps_run"] == STEPS - 1
        resumed = deterministic(read_metrics(run / "metrics.jsonl"))
    train(config(f"sqlite:///{tmp_path / 'reference.db'}"), tmp_path / "reference")
    assert resumed == pytest.approx(deterministic(read_metrics(tmp_path / "reference" / "metrics.jsonl")), rel=1e-6)
    runs = mlflow_histories(store, "disk")
    assert {r["status"] for r in runs.values()} == {"FINISHED"}
    assert [s for s, _ in runs["opt_char"]["metrics"]["train/reward_mean"]] == [1, 2, 3]


def test_a_disk_full_while_a_checkpoint_is_written_is_one_line_naming_the_file(tmp_path, monkeypatch):
    """Case 8c, the write itself: the first checkpoint (nothing to estimate it from yet) meets a full disk half-way;
    the half-written folder is removed, the line names the file and the free bytes, the runs are FAILED."""
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with tmpfs(tmp_path / "disk", 8 * 1024) as disk:
        run = disk / "run"
        on_step_start(monkeypatch, lambda step: step == 1 and fill(disk, leave=150_000))
        with pytest.raises(OutputError) as info:
            train(config(store), run)
        message = str(info.value)
        assert message.startswith(f"disk full: writing {run / 'checkpoints' / '.tmp_step_000001'}"), message
        free = int(message.split(" failed with ")[1].split(" bytes free; ")[0])
        assert free_bytes(disk) > free and not list((run / "checkpoints").glob("*step*"))  # the half-written one: gone
    assert {r["status"] for r in mlflow_histories(store, "disk").values()} == {"FAILED"}


def test_a_checkpoints_folder_made_read_only_mid_run_is_one_line_naming_it(tmp_path, monkeypatch):
    """Permission denied mid-run: the checkpoints folder turns read-only (a read-only bind mount) after checkpoint 1.
    One line naming the folder it could not write, the runs FAILED; writable again, the run resumes to the end."""
    store, run = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "run"
    checkpoints = run / "checkpoints"
    on_step_start(monkeypatch, lambda step: step == 2 and make_read_only(checkpoints))
    try:
        with pytest.raises(OutputError) as info:
            train(config(store), run)
    finally:
        umount(checkpoints)
    assert str(info.value) == (
        f"{checkpoints / '.tmp_step_000002'}: read-only file system; make it writable, then resume with "
        f"trainer.resume={run}"
    )
    assert {r["status"] for r in mlflow_histories(store, "disk").values()} == {"FAILED"}
    monkeypatch.undo()
    assert train(config(store, f"trainer.resume={run}"), run)["last_step"] == STEPS
    assert {r["status"] for r in mlflow_histories(store, "disk").values()} == {"FINISHED"}


def test_a_store_that_fills_up_while_the_runs_are_created_is_one_line(tmp_path, monkeypatch):
    """Case 8d: the store's disk fills up between the parent run and its agents' runs. Before: 5 tracebacks and 2
    runs left RUNNING. Now one line naming the store and its free bytes; the parent run is FAILED (by the failing
    process when the store still takes a status, else by the next run of that folder)."""
    from mlflow.tracking import MlflowClient

    with tmpfs(tmp_path / "disk", 4 * 1024) as disk:
        store, run = f"sqlite:///{disk / 'mlflow.db'}", tmp_path / "run"
        create_run, fillers = MlflowClient.create_run, []

        def create_then_fill(self, *args, **kwargs):
            made = create_run(self, *args, **kwargs)
            if not fillers:
                fillers.append(fill(disk))
            return made

        monkeypatch.setattr(MlflowClient, "create_run", create_then_fill)
        with pytest.raises(OutputError) as info:
            train(config(store), run)
        message = str(info.value)
        assert (
            message.startswith(f"disk full: MLflow store {disk / 'mlflow.db'} has ") and " bytes free while " in message
        )
        monkeypatch.undo()
        fillers[0].unlink()
        before = {r.info.run_id: r.info.status for r in MlflowClient(store).search_runs([_experiment(store)])}
        assert len(before) == 1  # the parent run only
        train(config(store), run)  # the same folder again, space freed: the run left behind is closed
        runs = MlflowClient(store).search_runs([_experiment(store)])
        status = {r.info.run_id: r.info.status for r in runs}
        assert [status[run_id] for run_id in before] == ["FAILED"] and sorted(status.values()).count("FINISHED") == 3


def _experiment(store: str) -> str:
    from mlflow.tracking import MlflowClient

    return MlflowClient(store).get_experiment_by_name("disk").experiment_id


def test_a_store_that_fills_up_and_recovers_prints_one_line_each_way(tmp_path, monkeypatch, capfd, caplog):
    """Case 9c: the store's disk full for two steps, then freed. Before: MLflow printed each failed write with its
    traceback, SQL and parameters (67 to 1,641 lines). Now: one warning when it fails, one when it answers again, no
    MLflow output, and every metric reaches the store."""
    with tmpfs(tmp_path / "disk", 4 * 1024) as disk:
        store, fillers = f"sqlite:///{disk / 'mlflow.db'}", []

        def outage(step: int) -> None:
            if step == 2:
                fillers.append(fill(disk))
            if step == 4:
                fillers[0].unlink()

        on_step_start(monkeypatch, outage)
        steps = ["trainer.steps=5", "trainer.checkpoint_every=0", "tracking.flush_every=1", "tracking.retry_s=0.5"]
        capfd.readouterr()
        with caplog.at_level(logging.WARNING, logger="hacrl_exp.tracking"):
            train(config(store, *steps), tmp_path / "run")
        printed = capfd.readouterr().err
        assert "Traceback" not in printed and "mlflow" not in printed.lower(), printed[-3000:]
        assert caplog.text.count("unavailable") == 1 and caplog.text.count("answers again") == 1, caplog.text
        runs = mlflow_histories(store, "disk")
        assert {r["status"] for r in runs.values()} == {"FINISHED"}
        assert [s for s, _ in runs["gpt2_bpe"]["metrics"]["train/reward_mean"]] == [1, 2, 3, 4, 5]
        shutil.rmtree(disk / "mlruns", ignore_errors=True)
    assert Path(tmp_path / "run" / "summary.json").is_file()


def test_a_store_on_a_full_disk_is_refused_before_anything_is_written(tmp_path):
    """The store's file system has under 1 MiB free when the run starts: one line, no store written."""
    from hacrl_exp.config.schema import TrackingConfig
    from hacrl_exp.errors import ConfigError
    from hacrl_exp.tracking.store import check_store

    with tmpfs(tmp_path / "disk", 2 * 1024) as disk:
        fill(disk, leave=100_000)
        with pytest.raises(ConfigError, match=rf"^tracking.uri=sqlite:///{disk}/mlflow.db: disk full: {disk} has \d+ "):
            check_store(TrackingConfig(uri=f"sqlite:///{disk}/mlflow.db"))
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_a_tokenizer_written_to_a_full_disk_is_an_os_error_naming_its_file(tmp_path):
    """The Rust `tokenizers` library reports a full disk while writing tokenizer.json as a bare Exception, which the
    checkpoint's one-line handling did not catch (CI failed on it: a traceback, when the filler left room for the
    model but not for tokenizer.json). save_tokenizer raises it as OSError(ENOSPC) naming the file."""
    from hacrl_exp.agents.agent import save_tokenizer
    from hacrl_exp.agents.tiny import build_tokenizer

    tokenizer = build_tokenizer("char", "0123456789+=")
    with tmpfs(tmp_path / "disk", 16) as disk:
        fill(disk, leave=4096)  # one page: tokenizer_config.json (written first, by Python) fits, tokenizer.json not
        with pytest.raises(OSError) as info:
            save_tokenizer(tokenizer, disk)
        assert info.value.errno == errno.ENOSPC and info.value.filename == str(disk / "tokenizer.json"), info.value
        line = str(output_error(info.value, disk, "then resume"))
        assert line.startswith(f"disk full: writing {disk / 'tokenizer.json'} failed with "), line
