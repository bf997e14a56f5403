"""Signals and locks with real processes: SIGTERM / Ctrl-C stop after a checkpoint and the run resumes exactly; a
second Ctrl-C stops at once; a second process cannot write into a run folder another one holds (the refused run is
in-process, tests/cli.py: the lock is held by a real process all the same)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hacrl_exp.crash_drill import check_checkpoints, deterministic, mlflow_histories
from hacrl_exp.trainer.checkpoint import find_checkpoint
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import read_metrics
from hacrl_exp.trainer.validate import preflight
from tests.cli import run_cli
from tests.e2e.tiny import tiny_overrides

STEPS = 8
# no periodic checkpoint: the one written on the signal is what the resume continues from
OVERRIDES = [*tiny_overrides("pair", STEPS), "trainer.checkpoint_every=0", "tracking.flush_every=1"]


def launch(run: Path, store: str, *extra: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "hacrl_exp.run", *OVERRIDES, f"tracking.uri={store}", "tracking.experiment=sig"]
    command += [f"trainer.output_dir={run}", f"hydra.run.dir={run.parent / 'hydra'}", *extra]
    return subprocess.Popen(command, cwd=run.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for(condition, process: subprocess.Popen, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"ended before {what}: {process.stderr.read()[-2000:]}"
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def trained_steps(run: Path) -> int:
    path = run / "metrics.jsonl"
    return max((r["step"] for r in read_metrics(path) if "train/reward_mean" in r), default=0) if path.exists() else 0


def last_line(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.strip() and "WARNING" not in x]
    return lines[-1] if lines else ""


def test_sigterm_checkpoints_a_second_process_is_locked_out_and_the_resume_is_exact(tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = tmp_path / "run"
    first = launch(run, store)
    wait_for(lambda: trained_steps(run) >= 1, first, "step 1")
    first.send_signal(signal.SIGTERM)
    stderr = first.communicate(timeout=300)[1]
    assert first.returncode == 143, stderr[-2000:]
    step = check_checkpoints(run)  # written on the signal, complete, loadable
    assert 1 <= step < STEPS and last_line(stderr) == f"SIGTERM at step {step}: checkpoint written; resume with " + (
        f"trainer.resume={run}"
    )
    assert "Traceback" not in stderr and not (run / "summary.json").exists()
    assert {r["status"] for r in mlflow_histories(store, "sig").values()} == {"KILLED"}

    second = launch(run, store, f"trainer.resume={run}")
    wait_for(lambda: (run / ".lock").read_text() == str(second.pid), second, "the lock")
    second.send_signal(signal.SIGSTOP)  # holds the run folder while a third process tries it
    try:
        third = run_cli("hacrl_exp.run", [*OVERRIDES, f"trainer.resume={run}", "tracking.experiment=sig"], cwd=tmp_path)
    finally:
        second.send_signal(signal.SIGCONT)
    assert third.returncode == 2 and last_line(third.stderr).startswith("ConfigError: trainer.output_dir="), (
        third.stderr
    )
    assert f"in use by process {second.pid}" in third.stderr and "Traceback" not in third.stderr
    second.communicate(timeout=300)
    assert second.returncode == 0

    train(preflight([*OVERRIDES, f"tracking.uri={store}", "tracking.experiment=ref"]), tmp_path / "reference")
    want = deterministic(read_metrics(tmp_path / "reference" / "metrics.jsonl"))
    assert deterministic(read_metrics(run / "metrics.jsonl")) == pytest.approx(want, rel=1e-6, abs=1e-6)
    summary = json.loads((run / "summary.json").read_text())
    assert list(summary["evals"]) == ["0", str(STEPS)]
    assert {r["status"] for r in mlflow_histories(store, "sig").values()} == {"FINISHED"}


def test_a_second_ctrl_c_stops_at_once_and_keeps_the_last_checkpoint(tmp_path):
    run = tmp_path / "run"
    process = launch(run, f"sqlite:///{tmp_path / 'mlflow.db'}", "trainer.checkpoint_every=1", "trainer.steps=40")
    wait_for(lambda: find_checkpoint(run) is not None, process, "a checkpoint")
    process.send_signal(signal.SIGINT)
    while "finishing this step" not in (line := process.stderr.readline()):  # the first one was handled
        assert line, "the process ended before handling SIGINT"
    process.send_signal(signal.SIGINT)
    stderr = process.communicate(timeout=300)[1]
    assert process.returncode == 130 and "Traceback" not in stderr, stderr[-2000:]
    assert last_line(stderr) == f"stopped at once; resume from the last checkpoint with trainer.resume={run}"
    assert check_checkpoints(run) >= 1


HELD = """
import os, signal, sys
from pathlib import Path
from hacrl_exp.trainer.signals import StopRequests, held
with StopRequests(Path("run")):
    with held():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # the stop at once: it waits for the block
        print("block ended", flush=True)
    print("ran past the block", flush=True)
"""


def test_a_second_ctrl_c_inside_a_held_block_exits_when_the_block_ends():
    """CI once caught both Ctrl-Cs between a checkpoint's rename and its `latest`; `held` keeps the two together."""
    done = subprocess.run([sys.executable, "-c", HELD], capture_output=True, text=True, timeout=120)
    assert done.returncode == 130 and done.stdout == "block ended\n", (done.stdout, done.stderr)
    assert last_line(done.stderr) == "stopped at once; resume from the last checkpoint with trainer.resume=run"


def logged_models(store: str, experiment: str) -> list[str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    found = client.search_logged_models([client.get_experiment_by_name(experiment).experiment_id])
    return sorted(m.source_run_id for m in found if str(m.status).endswith("READY"))


def test_a_second_sigterm_during_model_logging_exits_143_at_once_and_a_resume_logs_the_rest(tmp_path, capsys):
    """Case 6a: the second SIGTERM during the final model logging was swallowed in a sqlalchemy garbage-collection
    callback and the process ran on to exit 0. Now the first sets the flag (read between the models), the second exits
    143 at once; the resume logs what is missing (2 models in all, none twice) and closes the runs."""
    store, run = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "run"
    process = launch(run, store, "trainer.steps=2")
    wait_for(lambda: (run / "summary.json").exists(), process, "the summary (written before the models are logged)")
    process.send_signal(signal.SIGTERM)
    while "finishing this step" not in (line := process.stderr.readline()):  # the first: a flag, not an exit
        assert line, "the process ended before handling SIGTERM"
    process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    stderr = process.communicate(timeout=60)[1]
    assert process.returncode == 143 and time.monotonic() - sent < 5 and "Traceback" not in stderr, stderr[-2000:]
    assert last_line(stderr) == f"stopped at once; resume from the last checkpoint with trainer.resume={run}"

    assert {r["status"] for r in mlflow_histories(store, "sig").values()} == {"RUNNING"}  # until resumed (docs)

    train(preflight([*OVERRIDES, "trainer.steps=2", f"trainer.resume={run}", "tracking.experiment=sig"]), run)
    assert "the run already finished at step 2" in capsys.readouterr().err
    runs = mlflow_histories(store, "sig")
    assert {r["status"] for r in runs.values()} == {"FINISHED"}
    assert logged_models(store, "sig") == sorted(runs[a]["run_id"] for a in ("opt_char", "gpt2_bpe"))


@pytest.mark.parametrize("delay", [0.3, 1.5])
def test_ctrl_c_during_start_up_exits_quietly_with_130(tmp_path, delay):
    """Case 6b: Ctrl-C in the first half-second printed a raw traceback (the imports ran before any handler)."""
    process = launch(tmp_path / "run", f"sqlite:///{tmp_path / 'mlflow.db'}")
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    stderr = process.communicate(timeout=60)[1]
    assert process.returncode == 130 and stderr == "interrupted before training started; nothing was trained\n", stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "hydra").exists()
