"""`python -m hacrl_exp.ui`: one line and exit code 2 on bad input; a real start on a small real store (measured 41 s
and 100 s on the shared 2-core machine: MLflow's server start dominates)."""

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from hacrl_exp import ui
from hacrl_exp.tracking.views import FINAL_VIEW, VIEW_TAG


def exit_line(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as done:
        ui.main(argv)
    assert done.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert "no such file" in exit_line(capsys, ["--store", f"sqlite:///{tmp_path / 'none.db'}"])
    assert "tracking server already" in exit_line(capsys, ["--store", "http://127.0.0.1:5000"])
    store = tmp_path / "mlflow.db"
    with contextlib.closing(sqlite3.connect(store)) as db:  # enough of a store for the checks after the store's
        db.execute("CREATE TABLE experiments (experiment_id INTEGER)")
    assert "--reports" in exit_line(capsys, ["--store", f"sqlite:///{store}", "--reports", str(tmp_path / "no")])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = exit_line(capsys, ["--store", f"sqlite:///{store}", "--port", str(port), "--reports", str(tmp_path)])
        assert f"--port {port}" in line and "taken" in line


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def outward_address() -> str:
    """This machine's address on its default route (a UDP socket's connect sends nothing); 127.0.0.1 without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def test_it_serves_the_store_and_the_reports_and_stops_both(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("hacrl")
    tags = {"role": "parent", "agents": "opt_char+gpt2_bpe"}
    client.set_terminated(client.create_run(experiment, run_name="hacpo-opt_char+gpt2_bpe-s0", tags=tags).info.run_id)
    (tmp_path / "reports" / "grid").mkdir(parents=True)
    (tmp_path / "reports" / "grid" / "report.html").write_text("<h1>report</h1>")
    port, reports_port = free_port(), free_port()
    command = [sys.executable, "-m", "hacrl_exp.ui", "--store", uri, "--port", str(port)]
    command += ["--reports", str(tmp_path / "reports"), "--reports-port", str(reports_port)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        deadline = time.monotonic() + 240
        while not (lines and lines[-1].startswith("Ctrl-C")) and time.monotonic() < deadline:
            line = server.stdout.readline()
            assert line, f"hacrl_exp.ui stopped: {server.stderr.read()}"
            lines.append(line.strip())
        printed = "\n".join(lines)
        link = f"http://127.0.0.1:{port}/#/experiments/{experiment}/runs?workflowType=machine_learning"
        assert f"final accuracy: {link}&viewStateShareKey={FINAL_VIEW}" in printed
        assert f"home: http://127.0.0.1:{port}/#/?workflowType=machine_learning" in printed
        assert f"grid: http://127.0.0.1:{reports_port}/grid/report.html" in printed
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10).status == 200
        page = urllib.request.urlopen(f"http://127.0.0.1:{reports_port}/grid/report.html", timeout=10).read()
        assert page == b"<h1>report</h1>"
        address = outward_address()
        if not address.startswith("127."):  # this machine's other address: neither server listens there
            for used in (port, reports_port):
                with pytest.raises(OSError):
                    socket.create_connection((address, used), timeout=5).close()
        state = json.loads(json.loads(client.get_experiment(experiment).tags[VIEW_TAG + FINAL_VIEW])["state"])
        assert "metrics.`final/accuracy_mean/gpt2_bpe`" in state["selectedColumns"]
    finally:
        os.kill(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    assert server.returncode == 0
    started = next(line for line in server.stderr.read().splitlines() if line.startswith("starting mlflow server"))
    log = Path(started.rsplit("log ", 1)[1].rstrip(")"))  # in a private folder of the temp folder
    assert log.parent.parent == Path(tempfile.gettempdir()) and not log.parent.exists()  # kept only after a failure
    for used in (port, reports_port):  # both servers (and MLflow's workers) are gone
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", used))
