"""executor.placement=shared survives a kill inside an agent's sleep: the resumed schedule goes on where the killed one
stopped, and the metrics are the uninterrupted run's (the local executor, which takes the same turns as Ray's)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from hacrl_exp.crash_drill import deterministic
from hacrl_exp.faults import CRASH_ENV
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import read_metrics
from hacrl_exp.trainer.schedule import FILE, read_schedule, schedule_problems
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides

STEPS = 3


def _turns(rows: list[dict]) -> list[tuple]:
    return [(r["step"], r["agent"], r["event"], r["call"]) for r in rows]


def test_a_kill_during_a_sleep_resumes_the_schedule_where_it_stopped(tmp_path):
    """The local executor takes the same turns (executor.placement=shared): kill -9 inside an agent's sleep in step 2
    (HACRL_CRASH_AT, hacrl_exp.faults), resume: the schedule keeps the steps up to the checkpoint, records the
    restart's build and load turns, and goes on as the uninterrupted run did; the metrics are that run's."""
    overrides = [*tiny_overrides("pair", steps=STEPS), "tracking.backend=none", "executor.placement=shared"]
    overrides.append("trainer.checkpoint_every=1")
    train(preflight(overrides), tmp_path / "whole")
    whole = read_schedule(tmp_path / "whole" / FILE)
    assert schedule_problems(whole) == []
    sleeps = [r for r in whole if r["event"] == "sleep"]
    nth = 1 + next(n for n, r in enumerate(sleeps) if (r["step"], r["call"]) == (2, "learn"))  # step 2's first learn

    run = tmp_path / "killed"
    command = [sys.executable, "-m", "hacrl_exp.run", *overrides, f"trainer.output_dir={run}"]
    command.append(f"hydra.run.dir={tmp_path / 'hydra'}")
    killed = subprocess.run(command, env={**os.environ, CRASH_ENV: f"sleep:{nth}"}, capture_output=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    assert read_schedule(run / FILE)[-1]["step"] == 2  # it died inside step 2, after the checkpoint of step 1

    train(preflight([*overrides, f"trainer.resume={run}"]), run)
    resumed = read_schedule(run / FILE)
    assert schedule_problems(resumed) == []
    kept = [t for t in _turns(whole) if t[0] <= 1]
    restart = _turns(resumed)[len(kept) : len(_turns(resumed)) - len([t for t in _turns(whole) if t[0] > 1])]
    assert _turns(resumed)[: len(kept)] == kept  # up to the checkpoint, as recorded before the kill
    assert {(event, call) for _, _, event, call in restart} == {
        ("build", "build"),
        ("sleep", "build"),
        ("wake", "load"),
        ("call", "load"),
        ("sleep", "load"),
    }
    assert _turns(resumed)[len(kept) + len(restart) :] == [t for t in _turns(whole) if t[0] > 1]  # then as it went
    want = deterministic(read_metrics(tmp_path / "whole" / "metrics.jsonl"))
    assert deterministic(read_metrics(run / "metrics.jsonl")) == want
