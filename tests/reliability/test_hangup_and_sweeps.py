"""Real processes (issue 40; a run that a lock only refuses runs in-process, tests/cli.py): SIGHUP, a closed
terminal, is handled as SIGTERM (exit 129, a checkpoint, the MLflow runs KILLED), also when the terminal can no
longer be written to; two α sweeps on one study never run at once (the second is one line naming the study and the
first's pid), and two started together on a fresh store do not crash in MLflow's or Optuna's schema creation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hacrl_exp.crash_drill import check_checkpoints, mlflow_histories
from tests.cli import run_cli
from tests.e2e.tiny import tiny_overrides
from tests.reliability.test_signals_and_locks import OVERRIDES, last_line, trained_steps, wait_for

optuna = pytest.importorskip("optuna")


def start_run(run: Path, store: str, output) -> subprocess.Popen:
    command = [sys.executable, "-m", "hacrl_exp.run", *OVERRIDES, f"tracking.uri={store}", "tracking.experiment=hup"]
    command += [f"trainer.output_dir={run}", f"hydra.run.dir={run.parent / 'hydra'}"]
    return subprocess.Popen(command, cwd=run.parent, stdout=output, stderr=output, text=True)


@pytest.mark.parametrize("terminal", ["open", "closed"])
def test_sighup_checkpoints_and_exits_129(tmp_path, terminal):
    """Before: SIGHUP ended the run at once with 129, the MLflow runs left RUNNING and the steps since the last
    checkpoint lost. A closed terminal: its writes fail (EPIPE here, EIO on a tty) and must not end the stop."""
    store, run = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "run"
    process = start_run(run, store, subprocess.PIPE)
    wait_for(lambda: trained_steps(run) >= 1, process, "step 1")
    if terminal == "closed":
        process.stdout.close()  # the terminal is gone: every later write of the process fails
        process.stderr.close()
    process.send_signal(signal.SIGHUP)
    if terminal == "closed":
        assert process.wait(timeout=300) == 129
    else:
        stderr = process.communicate(timeout=300)[1]
        assert process.returncode == 129 and "Traceback" not in stderr, stderr[-2000:]
        assert last_line(stderr).startswith(f"SIGHUP at step {check_checkpoints(run)}: checkpoint written; resume")
    step = check_checkpoints(run)  # written on the signal, complete, loadable
    assert 1 <= step and step == trained_steps(run)  # no step trained after the checkpoint, none lost before it
    assert {r["status"] for r in mlflow_histories(store, "hup").values()} == {"KILLED"}


def test_sighup_during_start_up_exits_129_in_one_line(tmp_path):
    process = start_run(tmp_path / "run", f"sqlite:///{tmp_path / 'mlflow.db'}", subprocess.PIPE)
    time.sleep(1.5)  # in the imports or the checks
    process.send_signal(signal.SIGHUP)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 129 and "Traceback" not in stderr, stderr
    assert last_line(stderr) == "interrupted before training started; nothing was trained"


def sweep_arguments(folder: Path, *extra: str) -> list[str]:
    """`python -m hacrl_exp.run`'s arguments for an α sweep of the tiny pair on study `s` (1 step per trial)."""
    arguments = ["-m", "+hparams_search=alpha_pair", *tiny_overrides("pair", steps=1), "trainer.eval_every=1"]
    return [*arguments, f"hydra.sweep.dir={folder}", "hydra.sweeper.study_name=s", *extra]


def sweep(folder: Path, *extra: str, output=subprocess.PIPE, env=None) -> subprocess.Popen:
    """A real `python -m hacrl_exp.run -m` α sweep (sweep_arguments)."""
    command = [sys.executable, "-m", "hacrl_exp.run", *sweep_arguments(folder, *extra)]
    return subprocess.Popen(command, cwd=folder.parent, stdout=output, stderr=output, text=True, env=env)


def trial_states(folder: Path) -> list[str]:
    storage = f"sqlite:///{folder / 'optuna.db'}"
    studies = optuna.get_all_study_names(storage)
    return sorted(t.state.name for name in studies for t in optuna.load_study(study_name=name, storage=storage).trials)


def test_a_second_sweep_on_a_live_study_is_refused_naming_its_pid(tmp_path):
    """Before: the second process marked the first's live trial interrupted (FAIL), closed its MLflow runs, and the
    first crashed (`Cannot tell a FAIL trial`)."""
    folder = tmp_path / "sweep"
    folder.mkdir()
    first = sweep(folder, "hydra.sweeper.n_trials=2", output=subprocess.DEVNULL)
    wait_for(lambda: (folder / "trial_0" / "config.json").exists(), first, "the first trial", timeout=300)
    first.send_signal(signal.SIGSTOP)  # a live trial, held while the second process tries the study
    try:
        # refused by the study's lock, which the first (real) process holds: in this process, no interpreter to start
        second = run_cli("hacrl_exp.run", sweep_arguments(folder, "hydra.sweeper.n_trials=2"), cwd=folder.parent)
        stderr = second.stderr
    finally:
        first.send_signal(signal.SIGCONT)
    assert second.returncode == 2 and "Traceback" not in stderr, stderr[-3000:]
    lock = folder / "optuna.db.s.lock"
    assert last_line(stderr) == (
        f"ConfigError: study s (sqlite:///{folder / 'optuna.db'}) is being run by process {first.pid} (it holds "
        f"{lock}); wait for it to end, or give another hydra.sweeper.study_name"
    )
    assert first.wait(timeout=300) == 0
    assert trial_states(folder) == ["COMPLETE"] * 4  # 2 trials × 2 edge studies: none taken for interrupted


def test_two_sweeps_started_together_on_a_fresh_store_do_not_crash(tmp_path):
    """Before: one of them crashed in MLflow's schema migration of the new store. Now the store and the Optuna
    storage are created under a lock, and the study runs in one process: the other is refused or finds it done."""
    folder = tmp_path / "sweep"
    folder.mkdir()
    # MLflow's own migrations, as before the store template (hacrl_exp/tracking/store_template.py): they raced
    env = os.environ | {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'fresh.db'}", "HACRL_MLFLOW_TEMPLATE": "0"}
    both = [sweep(folder, "hydra.sweeper.n_trials=1", env=env) for _ in range(2)]
    results = [(p, *p.communicate(timeout=300)) for p in both]
    codes = sorted(p.returncode for p, _, _ in results)
    for process, _, stderr in results:
        assert "Traceback" not in stderr, stderr[-3000:]
        if process.returncode == 2:
            other = next(p for p in both if p is not process)
            assert f"is being run by process {other.pid}" in last_line(stderr), stderr[-2000:]
    assert codes in ([0, 0], [0, 2]), [r[2][-2000:] for r in results]
    assert trial_states(folder) == ["COMPLETE"] * 2
