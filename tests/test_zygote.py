"""tests/zygote.py: a zygote `python -m` child sees what a new interpreter's sees (argv, working folder, environment,
signal handlers, root logger, torch threads, stdin, session, warnings on stderr), waits for its threads on the way out
and exits, and dies by a signal, as one does."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests import zygote

REPO = Path(__file__).resolve().parents[1]


def seen(popen, tmp_path, *args: str, **kwargs):
    command = [sys.executable, "-m", "tests.zygote_probe", *args]
    env = {**os.environ, "ZYGOTE_PROBE": "yes", "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "2"}  # tests.* found
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return popen(command, cwd=tmp_path, env=env, text=True, **pipes, **kwargs)


def test_a_zygote_child_sees_what_a_new_interpreter_sees(tmp_path):
    done = []
    for popen in (subprocess.Popen, zygote.Popen):
        with seen(popen, tmp_path, "a", "b", start_new_session=True) as process:
            stdout, stderr = process.communicate("typed", timeout=120)
        first, *rest = stdout.splitlines()
        done.append((process.returncode, json.loads(first), rest, stderr.splitlines()[-2:]))
    new, child = done
    assert child == new
    code, view, last, warning = child
    assert last == ["the last thread ended"]
    assert code == 3 and view["argv"] == ["a", "b"] and view["cwd"] == str(tmp_path) and view["probe_env"] == "yes"
    # SIGINT's handler is the new interpreter's, compared above: Python's (KeyboardInterrupt), or ignored where the
    # test process was started with SIGINT ignored (a background job of a shell), as both then inherit
    assert view["main"] and view["root_handlers"] == 0 and view["torch_threads"] == 2
    assert view["main_process"] and view["session_leader"] and view["stdin"] == "typed"
    assert "UserWarning: a warning a new interpreter prints" in warning[0]


def test_a_zygote_child_killed_or_stopped_by_a_signal_ends_as_a_process_does(tmp_path):
    for sig in (signal.SIGKILL, signal.SIGTERM):
        with seen(zygote.Popen, tmp_path, "sleep") as process:
            process.stdin.close()
            assert json.loads(process.stdout.readline())["argv"] == ["sleep"]
            process.send_signal(sig)
            assert process.wait(timeout=60) == -sig
