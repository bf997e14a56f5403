"""The MLflow store, resolved once and checked before a run writes anything.

`store_location` parses the URI the user gave (tracking.uri, else MLFLOW_TRACKING_URI, else ./mlflow.db) into the
store MLflow will open, and refuses in one line a URI that MLflow would read differently from what was typed: a `?`
(MLflow's sqlite driver reads what follows as options, so `sqlite:////a/p?x/mlflow.db` is the database `/a/p`), a
`#`, a `%`-escape, or a host in a sqlite URI. Everything after (the probe, the tracker, the `mlflow ui` hint, the
store recorded in checkpoints) uses the location's canonical URI: a sqlite path made absolute.

`check_store` is a short probe (at most `PROBE_S` seconds) that fails with one line naming `tracking.uri` (or
MLFLOW_TRACKING_URI) and what answered, instead of MLflow's minutes of retries and tracebacks. Mid-run outages are
handled by the tracker (hacrl_exp.tracking: buffer, warn once, replay)."""

from __future__ import annotations

import logging
import os
import sqlite3
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from hacrl_exp.config.schema import TrackingConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.paths import free_bytes

PROBE_S = 10.0
OTHER_SCHEMES = ("postgresql", "mysql", "mssql", "databricks", "databricks-uc", "uc")  # not probed: MLflow's own


def default_uri() -> str:
    """$MLFLOW_TRACKING_URI, else the sqlite store mlflow.db in the launch folder."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


SQLITE = "sqlite:///"


@dataclass(frozen=True)
class StoreLocation:
    """Where MLflow keeps a job's runs: `uri` (canonical: a sqlite path made absolute) and, for a sqlite or file
    store, the database file or folder `path`; `source` is the setting it came from, for messages."""

    uri: str
    scheme: str
    path: Path | None
    source: str


def store_location(cfg: TrackingConfig) -> StoreLocation:
    """The store of `cfg`, parsed strictly (module docstring); ConfigError naming the setting when MLflow would read
    the URI as another store than the one typed."""
    return parse_store_uri(cfg.uri or default_uri(), store_source(cfg))


def parse_store_uri(uri: str, source: str) -> StoreLocation:
    """`uri` parsed strictly into the store MLflow will open (module docstring); ConfigError naming `source` (the
    setting or flag it came from) otherwise. Shared by every entry point that opens a store (run, ui, report)."""
    scheme = urlparse(uri).scheme
    if scheme in ("", "file") or scheme == "sqlite" or scheme in ("http", "https"):
        for char, what in (("?", "a query (?…), which MLflow reads as options"), ("#", "a fragment (#…)")):
            if char in uri:
                read = _as_mlflow_reads(uri)
                opens = f"; MLflow would open {read}" if read and read != uri[len(SQLITE) :] else ""
                raise ConfigError(
                    f"{source}: the URI has {what}, not part of a path{opens}; give a path without ? and # "
                    "(rename the folder)"
                )
    if scheme == "sqlite":
        return _sqlite_location(uri, source)
    if scheme in ("", "file"):
        if "%" in uri:
            raise ConfigError(f"{source}: MLflow decodes %-escapes in a file store's path; give the path as it is")
        return StoreLocation(uri, "file", Path(urlparse(uri).path if scheme else uri).absolute(), source)
    return StoreLocation(uri, scheme, None, source)


def check_database_url(url: str, source: str) -> str:
    """A database URL that is not MLflow's (an Optuna storage): a sqlite one parsed as strictly as a store
    (`parse_store_uri`: `sqlite:///…/p?x/optuna.db` is the database …/p to sqlalchemy), others as given (a
    PostgreSQL URL's `?` carries its options)."""
    return parse_store_uri(url, source).uri if urlparse(url).scheme == "sqlite" else url


def _as_mlflow_reads(uri: str) -> str | None:
    """The database file MLflow's sqlite driver opens for `uri` (sqlalchemy's URL parser, as MLflow uses it)."""
    if not uri.startswith(SQLITE):
        return None
    from sqlalchemy.engine import make_url

    return make_url(uri).database


def _sqlite_location(uri: str, source: str) -> StoreLocation:
    if not uri.startswith(SQLITE) or uri == SQLITE:
        raise ConfigError(
            f"{source}: a sqlite store is sqlite:///<path to the .db file> (three slashes, then the path: "
            "sqlite:////abs/mlflow.db or sqlite:///relative/mlflow.db)"
        )
    typed = uri[len(SQLITE) :]
    if typed == ":memory:":
        return StoreLocation(uri, "sqlite", None, source)
    read = _as_mlflow_reads(uri)
    if read != typed:
        raise ConfigError(f"{source}: MLflow would open {read}, not {typed} (it decodes %-escapes); give a plain path")
    path = Path(typed).absolute()
    return StoreLocation(f"{SQLITE}{path}", "sqlite", path, source)


def artifact_location(uri: str) -> str | None:
    """Where a new experiment of a sqlite store keeps artifacts: `mlruns/` beside the database file (MLflow's own
    default is ./mlruns in the current folder, which scatters run folders wherever a job was launched); None for
    other stores (a server decides)."""
    if not uri.startswith(SQLITE):
        return None
    return (Path(uri[len(SQLITE) :]).resolve().parent / "mlruns").as_uri()


def experiment_id_and_tags(client, name: str) -> tuple[str, dict[str, str]]:
    """Experiment `name`'s id and tags, the experiment created (artifacts at `artifact_location`, no tags) when the
    store has none by that name. Another job may create it between the lookup and the create (jobs side by side
    sharing a store): its experiment is then read, not an error."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is None:
        try:
            return client.create_experiment(name, artifact_location=artifact_location(client.tracking_uri)), {}
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            found = client.get_experiment_by_name(name)
    return found.experiment_id, dict(found.tags)


def store_source(cfg: TrackingConfig) -> str:
    """The setting the store's URI comes from, for error messages."""
    if cfg.uri:
        return f"tracking.uri={cfg.uri}"
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return f"MLFLOW_TRACKING_URI={os.environ['MLFLOW_TRACKING_URI']}"
    return f"the default store {default_uri()} (tracking.uri unset)"


def check_store(cfg: TrackingConfig, timeout: float = PROBE_S) -> StoreLocation | None:
    """The store of `cfg` (`store_location`), after checking that it can be written (sqlite, folder) or answers
    (http) within `timeout` seconds; ConfigError otherwise. tracking.backend=none checks nothing (None)."""
    if cfg.backend == "none":
        return None
    location = store_location(cfg)
    problem = None
    if location.scheme == "sqlite":
        problem = _sqlite_problem(location.path, timeout)
    elif location.scheme in ("http", "https"):
        problem = _http_problem(location.uri, timeout)
    elif location.scheme == "file":
        folder = location.path
        writable = folder if folder.exists() else folder.parent
        if not os.access(writable, os.W_OK):
            problem = f"the folder {writable} cannot be written"
    elif location.scheme not in OTHER_SCHEMES:
        problem = f"MLflow has no store for the scheme {location.scheme!r}"
    if problem:
        raise ConfigError(
            f"{location.source}: {problem}; fix it, use a store such as tracking.uri=sqlite:///<folder>/mlflow.db, "
            "or tracking.backend=none"
        )
    return location


def _sqlite_problem(path: Path | None, timeout: float) -> str | None:
    if path is None:  # sqlite:///:memory:
        return None
    try:
        return _sqlite_file_problem(path, timeout)
    except OSError as exc:  # e.g. a folder on the way this user may not enter
        return f"{path}: {exc.strerror or exc}"


MIN_FREE = 1 << 20
"""Free bytes a sqlite store's file system must have when a run starts (the store grows ~12 kB per step)."""


def _sqlite_file_problem(file: Path, timeout: float) -> str | None:
    if not file.parent.is_dir():
        return f"the folder {file.parent} does not exist"
    free = free_bytes(file.parent)
    if free < MIN_FREE:
        return f"disk full: {file.parent} has {free} bytes free, under the {MIN_FREE} a store needs"
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


class _OneLine(logging.Filter):
    """MLflow logs every failed store write with its traceback, the SQL and all its parameters (67 to 1,641 lines per
    outage), then raises the error, which the tracker reports once per outage: those records are dropped, and
    MLflow's other warnings are cut to their first line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info or record.levelno >= logging.ERROR:
            return False
        record.msg, record.args = (record.getMessage().splitlines() or [""])[0][:300], ()
        return True


def prepare_mlflow() -> None:
    """Before this process opens a store: new sqlite stores start from the migrated template (store_template.py:
    seconds saved per new store); MLflow's own logging at warning level (its INFO lines on creating a store's tables
    are not news), its store errors left to the tracker (`_OneLine`), so an outage prints one line per retry
    window, not thousands."""
    from hacrl_exp.tracking import store_template

    store_template.install()
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    store_log = logging.getLogger("mlflow.store.db.utils")
    if not any(isinstance(f, _OneLine) for f in store_log.filters):
        store_log.addFilter(_OneLine())
