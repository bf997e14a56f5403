"""The MLflow store, checked before a run writes anything: a short probe (at most `PROBE_S` seconds) that fails with
one line naming `tracking.uri` (or MLFLOW_TRACKING_URI) and what answered, instead of MLflow's minutes of retries
and tracebacks. Mid-run outages are handled by the tracker (hacrl_exp.tracking: buffer, warn once, replay)."""

from __future__ import annotations

import os
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from hacrl_exp.config.schema import TrackingConfig
from hacrl_exp.errors import ConfigError

PROBE_S = 10.0
OTHER_SCHEMES = ("postgresql", "mysql", "mssql", "databricks", "databricks-uc", "uc")  # not probed: MLflow's own


def default_uri() -> str:
    """$MLFLOW_TRACKING_URI, else the sqlite store mlflow.db in the launch folder."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def artifact_location(uri: str) -> str | None:
    """Where a new experiment of a sqlite store keeps artifacts: `mlruns/` beside the database file (MLflow's own
    default is ./mlruns in the current folder, which scatters run folders wherever a job was launched); None for
    other stores (a server decides)."""
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri[len("sqlite:///") :]).resolve().parent / "mlruns").as_uri()


def store_source(cfg: TrackingConfig) -> str:
    """The setting the store's URI comes from, for error messages."""
    if cfg.uri:
        return f"tracking.uri={cfg.uri}"
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return f"MLFLOW_TRACKING_URI={os.environ['MLFLOW_TRACKING_URI']}"
    return f"the default store {default_uri()} (tracking.uri unset)"


def check_store(cfg: TrackingConfig, timeout: float = PROBE_S) -> None:
    """Raise ConfigError unless the store of `cfg` can be written (sqlite, folder) or answers (http), within
    `timeout` seconds. tracking.backend=none checks nothing."""
    if cfg.backend == "none":
        return
    uri = cfg.uri or default_uri()
    scheme = urlparse(uri).scheme
    problem = None
    if scheme == "sqlite":
        problem = _sqlite_problem(uri, timeout)
    elif scheme in ("http", "https"):
        problem = _http_problem(uri, timeout)
    elif scheme in ("", "file"):
        folder = Path(urlparse(uri).path if scheme else uri)
        writable = folder if folder.exists() else folder.parent
        if not os.access(writable, os.W_OK):
            problem = f"the folder {writable} cannot be written"
    elif scheme not in OTHER_SCHEMES:
        problem = f"MLflow has no store for the scheme {scheme!r}"
    if problem:
        raise ConfigError(
            f"{store_source(cfg)}: {problem}; fix it, use a store such as tracking.uri=sqlite:///<folder>/mlflow.db, "
            "or tracking.backend=none"
        )


def _sqlite_problem(uri: str, timeout: float) -> str | None:
    path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else ""
    if not path or path == ":memory:":
        return None
    try:
        return _sqlite_file_problem(Path(path), timeout)
    except OSError as exc:  # e.g. a folder on the way this user may not enter
        return f"{path}: {exc.strerror or exc}"


def _sqlite_file_problem(file: Path, timeout: float) -> str | None:
    if not file.parent.is_dir():
        return f"the folder {file.parent} does not exist"
    if not file.exists():
        return None if os.access(file.parent, os.W_OK) else f"the folder {file.parent} cannot be written"
    if not os.access(file, os.W_OK) or not os.access(file.parent, os.W_OK):
        return f"{file} is read-only (sqlite also needs to write its folder)"
    try:
        connection = sqlite3.connect(f"file:{file}?mode=rw", uri=True, timeout=timeout)
        try:
            connection.execute("BEGIN IMMEDIATE")  # a write lock: what logging needs
            connection.rollback()
        finally:
            connection.close()
    except sqlite3.Error as exc:
        locked = "locked" in str(exc)
        return f"{file} is locked by another process for over {timeout:g} s" if locked else f"{file}: {exc}"
    return None


def _http_problem(uri: str, timeout: float) -> str | None:
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout) as response:
            return None if response.status == 200 else f"{uri}/health answered HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"{uri}/health answered HTTP {exc.code}; is it an MLflow tracking server?"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"nothing answered at {uri} within {timeout:g} s ({reason})"
