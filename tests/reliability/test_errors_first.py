"""Errors first, files later: every mistake that can be found without a model is one line naming the key, exit 2,
before Hydra's folder, the run folder or the MLflow store exist. And the tracking store: probed at start within
10 s; unavailable mid-run, training goes on and no metric is lost."""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from hacrl_exp import run
from hacrl_exp.config.schema import TrackingConfig
from hacrl_exp.crash_drill import mlflow_histories
from hacrl_exp.errors import ConfigError
from hacrl_exp.tracking.store import check_store
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.validate import preflight
from tests.cli import run_cli
from tests.e2e.tiny import tiny_overrides
from tests.reliability.hooks import on_step_start


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


HUGE = "agents.members.opt_char.model.hidden_size=65536"
CASES = {  # override(s) -> the start of the one line; {tmp} is the test's folder
    "empty tiers": (["task.tiers=[]"], "ConfigError: task.tiers is empty"),
    "output folder is a file": (["trainer.output_dir={tmp}/afile"], "ConfigError: trainer.output_dir={tmp}/afile is a"),
    "unknown store scheme": (["tracking.uri=foo://bar"], "ConfigError: tracking.uri=foo://bar: MLflow has no store"),
    "model too big": ([HUGE], f"ConfigError: {HUGE}: the model needs about"),
    "group too big": (
        ["trainer.group_size=4096", "trainer.prompts_per_step=100000"],
        "ConfigError: trainer.group_size=4096: a step keeps about",
    ),
    "no room for the prompt": (
        ["rollout.max_new_tokens=125"],
        "ConfigError: rollout.max_new_tokens=125 leaves no room",
    ),
    "missing device": (["trainer.device=cuda:63"], "ConfigError: trainer.device='cuda:63' but this machine has"),
    "missing resume folder": (["trainer.resume={tmp}/gone"], "ConfigError: trainer.resume={tmp}/gone does not exist"),
    "nothing listening": (
        ["tracking.uri=http://127.0.0.1:{port}"],
        "ConfigError: tracking.uri=http://127.0.0.1:{port}:",
    ),
}


DEFAULTS = {"hydra.run.dir": "hydra", "trainer.output_dir": "run"}
"""Where main_refuses points Hydra and the run unless the case names its own folder."""


def main_refuses(tmp_path, monkeypatch, capsys, argv: list[str]) -> str:
    """run.main() on `argv` (+ a Hydra folder and, unless given, a run folder under tmp_path): asserts one stderr line,
    exit 2, within 15 s, and nothing new under tmp_path; returns the line."""
    before = sorted(p.name for p in tmp_path.iterdir())
    capsys.readouterr()  # what the test's own set-up printed
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the default store: ./mlflow.db, which must not appear
    given = {a.split("=", 1)[0] for a in argv}
    argv = [*argv, *(f"{key}={tmp_path}/{name}" for key, name in DEFAULTS.items() if key not in given)]
    monkeypatch.setattr(sys, "argv", ["hacrl_exp.run", *argv])
    started = time.monotonic()
    with pytest.raises(SystemExit) as info:
        run.main()
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - started < 15 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no hydra/, run/, mlflow.db
    return err.strip()


@pytest.mark.parametrize("case", CASES)
def test_one_line_exit_2_and_nothing_written(case, tmp_path, monkeypatch, capsys):
    overrides, line = CASES[case]
    fill = {"tmp": tmp_path, "port": closed_port()}
    (tmp_path / "afile").write_text("not a folder")
    assert main_refuses(tmp_path, monkeypatch, capsys, [o.format(**fill) for o in overrides]).startswith(
        line.format(**fill)
    )


def test_cfg_only_prints(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}  # the default store: ./mlflow.db
    result = run_cli("hacrl_exp.run", ["--cfg", "job"], cwd=tmp_path, env=env)
    assert result.returncode == 0 and "algorithm:" in result.stdout, result.stderr
    assert list(tmp_path.iterdir()) == []  # no mlflow.db, no outputs/


def hold_lock(db: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the sqlite store's write lock for `seconds`; returns once it holds it."""
    code = (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(db)!r}); c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True)\n"
        f"time.sleep({seconds}); c.rollback()\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_store_locked_at_start_is_one_line_within_the_timeout(tmp_path):
    db = tmp_path / "mlflow.db"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.commit()
    locker = hold_lock(db, 10)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=f"tracking.uri=sqlite:///{db}: {db} is locked by another process"):
        check_store(TrackingConfig(uri=f"sqlite:///{db}"), timeout=1.0)
    assert time.monotonic() - started < 3
    locker.kill()
    locker.communicate()  # reaped: no zombie left for later tests that list this process's children


def unprivileged_error(check) -> str:
    """check() in a forked process that first drops root (root writes anything), as a real user meets a read-only
    store; the ConfigError it raised, or what else happened."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            check()
            message = "no error"
        except ConfigError as exc:
            message = f"ConfigError: {exc}"
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            message = repr(exc)
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        message = pipe.read()
    os.waitpid(pid, 0)
    return message


def test_a_read_only_store_is_one_line(tmp_path):
    db = tmp_path / "mlflow.db"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.commit()
    db.chmod(0o444)
    tmp_path.chmod(0o555)
    # let `nobody` reach it: the folders above it that others cannot enter (more of them under pytest-xdist)
    enter = [p for p in tmp_path.parents if os.geteuid() == 0 and not p.stat().st_mode & 0o001]
    modes = [p.stat().st_mode for p in enter]
    try:
        for folder in enter:
            folder.chmod(0o755)
        message = unprivileged_error(lambda: check_store(TrackingConfig(uri=f"sqlite:///{db}")))
    finally:
        tmp_path.chmod(0o755)
        for folder, mode in zip(enter, modes):
            folder.chmod(mode)
    assert message == (
        f"ConfigError: tracking.uri=sqlite:///{db}: {db} is read-only (sqlite also needs to write its folder); fix it, "
        "use a store such as tracking.uri=sqlite:///<folder>/mlflow.db, or tracking.backend=none"
    )


def test_a_store_locked_mid_run_buffers_and_loses_nothing(tmp_path, monkeypatch, caplog):
    store, db = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "mlflow.db"
    lockers, shortened = [], []
    # MLflow waits 20 s for a sqlite lock (the busy_timeout its sessions set); 5 s here, and a lock of 10 s, keep
    # the same margins (one flush fails, the retry outlasts the lock) at half the test's time
    import mlflow.store.db.utils as db_utils
    from sqlalchemy import sql

    def text(statement: str, *args, **kwargs):
        if "busy_timeout = 20000" in statement:
            shortened.append(statement)
        return sql.text(statement.replace("busy_timeout = 20000", "busy_timeout = 5000"), *args, **kwargs)

    monkeypatch.setattr(db_utils, "sql", SimpleNamespace(text=text))
    on_step_start(monkeypatch, lambda step: step == 2 and lockers.append(hold_lock(db, 10)))
    config = preflight([*tiny_overrides("pair", 5), "trainer.checkpoint_every=1", "tracking.retry_s=1"])
    config.tracking.uri = store
    with caplog.at_level(logging.WARNING, logger="hacrl_exp.tracking"):
        summary = train(config, tmp_path / "run")
    lockers[0].communicate(timeout=60)  # it let go of the lock on its own
    assert shortened, "MLflow no longer sets busy_timeout = 20000: this test's timings need another look"
    assert summary["last_step"] == 5 and len(lockers) == 1 and lockers[0].returncode == 0
    assert caplog.text.count("unavailable") == 1 and "answers again" in caplog.text, caplog.text  # warned once
    runs = mlflow_histories(store, "hacrl")
    assert {r["status"] for r in runs.values()} == {"FINISHED"}
    assert [s for s, _ in runs["gpt2_bpe"]["metrics"]["train/reward_mean"]] == [1, 2, 3, 4, 5]
