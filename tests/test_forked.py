"""tests/forked.py: a forked `python -m` child sees what a new interpreter's sees (argv, working folder, environment,
signal handlers, root logger, warnings on stderr) and exits, and dies by a signal, as one does."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests import forked

REPO = Path(__file__).resolve().parents[1]


def seen(popen, tmp_path, *args: str):
    command = [sys.executable, "-m", "tests.forked_probe", *args]
    env = {**os.environ, "FORKED_PROBE": "yes", "PYTHONPATH": str(REPO)}  # a new interpreter finds tests.*
    return popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_forked_child_sees_what_a_new_interpreter_sees(tmp_path):
    done = []
    for popen in (subprocess.Popen, forked.Popen):
        with seen(popen, tmp_path, "a", "b") as process:
            stdout, stderr = process.communicate(timeout=120)
        done.append((process.returncode, json.loads(stdout), stderr.splitlines()[-2:]))
    new, child = done
    assert child == new
    code, view, warning = child
    assert code == 3 and view["argv"] == ["a", "b"] and view["cwd"] == str(tmp_path) and view["probe_env"] == "yes"
    assert view["main"] and view["sigint_raises"] and view["root_handlers"] == 0
    assert "UserWarning: a warning a new interpreter prints" in warning[0]


def test_a_forked_child_killed_or_stopped_by_a_signal_ends_as_a_process_does(tmp_path):
    for sig in (signal.SIGKILL, signal.SIGTERM):
        with seen(forked.Popen, tmp_path, "sleep") as process:
            assert json.loads(process.stdout.readline())["argv"] == ["sleep"]
            process.send_signal(sig)
            assert process.wait(timeout=60) == -sig
