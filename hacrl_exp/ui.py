"""`python -m hacrl_exp.ui [--store URI] [--port N] [--reports DIR] [--open]`: MLflow's UI on a training store, with
links that land on the results, and the published reports served beside it.

    python -m hacrl_exp.ui                                   # the trainer's default store, ./mlflow.db
    python -m hacrl_exp.ui --store sqlite:////runs/mlflow.db --port 5050 --open

It starts `mlflow server` for the store on 127.0.0.1:N (default 5000; the server answers after ~20 s), and a small
static HTTP server for the reports folder (default: the repository's reports/) on 127.0.0.1:N+1 (`--reports-port`;
hacrl_exp.report.serve: an index at `/`, Markdown and CSV as UTF-8).
Before that, each training experiment of the store gets three saved views of MLflow's UI
(hacrl_exp.tracking.views): "Final accuracy" (one row per job: name, method, seed, each agent's final held-out
accuracy and start → final), "Compare methods" (the newest job's setting, agent runs grouped by agent and method, in
the chart view) and "Compare configurations". It prints one link per view, the experiment's Models page, each report
and the clicks that close what a first visit opens (`FIRST_VISIT`); every MLflow link carries
`workflowType=machine_learning`, so it opens in the "Model training" mode (the bare http://127.0.0.1:N/ opens MLflow
3's GenAI mode). Ctrl-C (or
SIGTERM, or SIGHUP when its terminal closes) stops both servers.

One line on stderr and exit code 2 when the store URI would open another store than the one typed (a `?`, `#` or
%-escape: parsed as `python -m hacrl_exp.run` parses tracking.uri), the store does not exist (a sqlite file or a
folder), --store is already a server, --reports is not a folder, or a port is outside [1024, 65535] or taken;
exit code 1 when the MLflow server stops or never answers (its log, `mlflow_<port>.log` in a private `hacrl_ui_*`
folder of the temp folder that only this user can enter, is named; a clean stop removes it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
import webbrowser
from pathlib import Path
from urllib.parse import urlparse

from hacrl_exp.config.flags import check_port_number
from hacrl_exp.errors import ConfigError, exit_on_bad_input
from hacrl_exp.paths import private_folder
from hacrl_exp.repo import REPO_ROOT
from hacrl_exp.report.serve import serve_reports
from hacrl_exp.tracking.store import artifact_location, default_uri, parse_store_uri
from hacrl_exp.tracking.views import COMPARE_VIEW, FINAL_VIEW, METHODS_VIEW, home_link, runs_link, write_views
from hacrl_exp.trainer.signals import SIGNALS

HOST = "127.0.0.1"
REPORTS = REPO_ROOT / "reports"
START_S = 180.0
"""How long the MLflow server may take to answer (~20 s on an idle machine; minutes on a loaded one)."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m hacrl_exp.ui", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///./mlflow.db)")
    parser.add_argument("--port", type=int, default=5000, help="MLflow UI port on 127.0.0.1 (default 5000)")
    parser.add_argument("--reports", type=Path, help="folder of published reports (default: the repository's reports/)")
    parser.add_argument("--reports-port", type=int, help="reports port on 127.0.0.1 (default: --port + 1)")
    parser.add_argument("--open", action="store_true", help="open the first link in the default browser")
    return parser.parse_args(argv)


def store_flag(uri: str | None) -> str:
    """The setting the store comes from, for messages: --store, MLFLOW_TRACKING_URI or the default store."""
    if uri:
        return f"--store {uri}"
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return f"MLFLOW_TRACKING_URI={os.environ['MLFLOW_TRACKING_URI']}"
    return f"the default store {default_uri()} (--store unset)"


def check_store(uri: str, source: str | None = None) -> str:
    """The store's URI as MLflow will read it (`parse_store_uri`: a `?` or `#` that would make MLflow open another
    store is refused); refuse a store that does not exist (mlflow server would create an empty one) or that is a
    server already."""
    uri = parse_store_uri(uri, source or f"--store {uri}").uri
    scheme = urlparse(uri).scheme
    if scheme in ("http", "https"):
        raise ConfigError(f"--store {uri} is a tracking server already: open its UI in a browser instead")
    if scheme == "sqlite":
        path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else ""
        if path and path != ":memory:" and not Path(path).is_file():
            raise ConfigError(f"--store {uri}: no such file; train a job first (python -m hacrl_exp.run) or pass one")
        problem = mlflow_tables_problem(Path(path)) if path and path != ":memory:" else None
        if problem:  # mlflow server would crash on it, or write its schema into someone else's file
            raise ConfigError(f"--store {uri}: {problem}; pass the store a training job wrote to (--store)")
    elif scheme in ("", "file") and not Path(urlparse(uri).path if scheme else uri).is_dir():
        raise ConfigError(f"--store {uri}: no such folder; pass the store a training job wrote to (--store)")
    return uri


def mlflow_tables_problem(file: Path) -> str | None:
    """Why the sqlite file is not an MLflow store (read only: not a database, or a database without MLflow's
    `experiments` table, such as an empty file), or None."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{file}?mode=ro", uri=True, timeout=10)) as connection:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        return f"not a readable sqlite database ({exc})"
    return None if "experiments" in tables else "holds no MLflow tables (an empty file, or another program's database)"


def check_port(port: int, flag: str) -> None:
    """Refuse a port on 127.0.0.1 that something already listens on (SO_REUSEADDR as the servers set it: a port
    whose last connections are closing is free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            raise ConfigError(f"{flag} {port}: {HOST}:{port} is taken ({exc.strerror}); pass another {flag}") from None


def training_experiments(uri: str) -> list[tuple[str, str, int]]:
    """(experiment id, name, jobs) of each experiment holding training jobs (role=parent runs), after writing its
    saved views (hacrl_exp.tracking.views) for the agents its jobs trained; a store it cannot write keeps the views
    it has (a warning)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found = []
    for experiment in client.search_experiments():
        jobs = client.search_runs(
            [experiment.experiment_id], "tags.role = 'parent'", max_results=50_000, order_by=["start_time DESC"]
        )
        if not jobs:
            continue
        agents = list(dict.fromkeys(a for job in jobs for a in job.data.tags.get("agents", "").split("+") if a))
        setting = next((job.data.tags["setting"] for job in jobs if "setting" in job.data.tags), None)
        try:
            write_views(client, experiment.experiment_id, agents, experiment.tags, setting)
        except Exception as exc:  # noqa: BLE001 - a read-only store still opens; its links just lack the view
            print(f"warning: saved views not written to {experiment.name} ({type(exc).__name__})", file=sys.stderr)
        found.append((experiment.experiment_id, experiment.name, len(jobs)))
    return found


def start_mlflow(uri: str, port: int, log_path: Path) -> subprocess.Popen:
    """`mlflow server` for the store on 127.0.0.1:port (one worker; a sqlite store's new artifacts beside it), in
    its own process group so that stopping it stops its workers. Without MLflow's job runner (GenAI judges and
    trace jobs): seven more processes of ~250 MB each that a training store never uses."""
    command = [str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri", uri]
    command += ["--host", HOST, "--port", str(port), "--workers", "1"]
    if artifact_location(uri):
        command += ["--artifacts-destination", artifact_location(uri)]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with log_path.open("w") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)


@contextlib.contextmanager
def stops_deferred():
    """Ctrl-C, SIGTERM and SIGHUP received inside the block are raised (KeyboardInterrupt) when it ends: a stop that
    came while `subprocess.Popen` was starting the server would otherwise leave the server running in its own session,
    with no `server` to stop (a test's SIGTERM right after "starting mlflow server" left one alive)."""
    received: list[int] = []
    before = {number: signal.signal(number, lambda signum, _frame: received.append(signum)) for number in SIGNALS}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
    if received:
        raise KeyboardInterrupt


def wait_until_up(server: subprocess.Popen, port: int, log_path: Path) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"mlflow server exited with code {server.returncode}; its log: {log_path}")
        try:
            urllib.request.urlopen(f"http://{HOST}:{port}/health", timeout=2)
            return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"mlflow server did not answer on {HOST}:{port} in {START_S:.0f} s; its log: {log_path}")


def stop(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL after 30 s."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


FIRST_VISIT = [
    "  first visit: MLflow opens its Assistant panel (right); its × closes it for good in this browser",
    "  a view's link shows a banner 'You're viewing a shared view'; its × closes it",
]
"""What no server setting or saved view of MLflow 3.17 decides: the Assistant panel opens by itself on a first visit
to a server on localhost (the browser's localStorage remembers it closed), and every view opened from a link carries
the shared-view banner (closed in the page's memory only)."""


def links(base: str, experiments: list[tuple[str, str, int]], reports: Path | None, reports_base: str) -> list[str]:
    """The lines printed once the servers answer: `  <label>: <url>`, one per link."""
    lines = [f"MLflow UI at {base}", f"  home: {home_link(base)}"]
    for experiment_id, name, jobs in experiments:
        lines.append(f"  {name} ({jobs} job{'s' * (jobs != 1)})")
        lines.append(f"    final accuracy: {runs_link(base, experiment_id, FINAL_VIEW)}")
        lines.append(f"    compare methods: {runs_link(base, experiment_id, METHODS_VIEW, charts=True)}")
        lines.append(f"    compare configurations: {runs_link(base, experiment_id, COMPARE_VIEW, charts=True)}")
        lines.append(f"    models: {base}/#/experiments/{experiment_id}/models?workflowType=machine_learning")
    if not experiments:
        lines.append("  (no training jobs in this store yet)")
    lines += FIRST_VISIT
    if reports is not None:
        lines.append(f"Reports at {reports_base}/")
        for page in sorted(reports.glob("*/report.html")):
            lines.append(f"  {page.parent.name}: {reports_base}/{page.relative_to(reports).as_posix()}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    uri = args.store or default_uri()
    reports = args.reports if args.reports is not None else (REPORTS if REPORTS.is_dir() else None)
    reports_port = args.port + 1 if args.reports_port is None else args.reports_port
    with exit_on_bad_input(ConfigError):
        check_port_number("--port", args.port)  # before binding: 0 would pick a port no link names, 70000 none
        check_port_number("--reports-port", reports_port)
        if reports is not None and reports_port == args.port:
            raise ConfigError(f"--reports-port {reports_port} is --port too; give the reports another port")
        uri = check_store(uri, store_flag(args.store))
        if reports is not None and not reports.is_dir():
            raise ConfigError(f"--reports {reports}: no such folder; pass the folder holding <name>/report.html")
        check_port(args.port, "--port")
        if reports is not None:
            check_port(reports_port, "--reports-port")
    experiments = training_experiments(uri)
    for signum in (signal.SIGTERM, signal.SIGHUP):  # stop both servers as Ctrl-C does (SIGHUP: a closed terminal)
        signal.signal(signum, signal.default_int_handler)
    log_path = private_folder("hacrl_ui_") / f"mlflow_{args.port}.log"  # no one else can plant a symlink there
    server, static, stopped = None, None, False
    try:
        print(f"starting mlflow server for {uri} on {HOST}:{args.port} (about 20 s; log {log_path})", file=sys.stderr)
        with stops_deferred():  # `server` is set before a stop is raised
            server = start_mlflow(uri, args.port, log_path)
        wait_until_up(server, args.port, log_path)
        static = serve_reports(reports, reports_port) if reports is not None else None
        base = f"http://{HOST}:{args.port}"
        lines = links(base, experiments, reports, f"http://{HOST}:{reports_port}")
        print("\n".join(lines + ["Ctrl-C stops the servers."]), flush=True)
        if args.open:
            webbrowser.open(runs_link(base, experiments[0][0]) if experiments else home_link(base))
        server.wait()
        print(f"mlflow server stopped (exit code {server.returncode}); its log: {log_path}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        stopped = True
        return 0
    finally:
        if server is not None:
            stop(server)
        if static is not None:
            static.shutdown()
        if stopped:  # the log is kept only when something went wrong
            log_path.unlink(missing_ok=True)
            log_path.parent.rmdir()


if __name__ == "__main__":
    raise SystemExit(main())
