"""A new sqlite MLflow store starts as a copy of an empty one already migrated, not from MLflow's ~60 migrations.

MLflow builds a new sqlite store by running its alembic revisions, most of them table rebuilds: 1.0 s median on a
2-core AMD EPYC, 3-10 s on a slower 2-core machine, paid by every run, evaluation or sweep that writes into a new store
(`python -m benchmarks.new_store`). The first new store a machine sees is migrated by MLflow as usual and saved, still
empty, as the template (`<cache>/mlflow_store_templates/mlflow-<version>.db`; the cache is $HACRL_CACHE_DIR, else
~/.cache/hacrl_exp); every later new store gets the template's pages through SQLite's backup API (0.04 s there). It is
the database MLflow's migrations give: the same MLflow version and schema, and only the rows the migrations write (its
default workspace); MLflow adds each new store's Default experiment afterwards, as for a store it migrated itself.

`install()` wraps `mlflow.store.db.utils._initialize_tables`, which MLflow's SqlAlchemyStore calls only for a database
without its tables; every other database (a server's, a half-migrated file, an in-memory one) goes to MLflow's own
function, and so does every store when the cache cannot be written or HACRL_MLFLOW_TEMPLATE=0.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from pathlib import Path

from hacrl_exp.paths import locked, user_cache_dir

log = logging.getLogger(__name__)

OPT_OUT = "HACRL_MLFLOW_TEMPLATE"
"""Set to 0 to let MLflow migrate every new store itself."""


def template_path() -> Path:
    """Where this MLflow version's empty migrated store is kept: one file per version, since a store's schema must be
    the head of the MLflow that opens it."""
    import mlflow

    return user_cache_dir() / "mlflow_store_templates" / f"mlflow-{mlflow.__version__}.db"


def copy_database(source: Path, target: Path) -> None:
    """Every page of the sqlite database `source` into `target` (SQLite's online backup: safe while `target` is open
    elsewhere, as MLflow's engine holds it)."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def _new_sqlite_file(engine) -> Path | None:
    """The path of `engine`'s database when it is a sqlite file without any table yet, else None."""
    import sqlalchemy

    database = engine.url.database
    if engine.url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    return Path(database) if not sqlalchemy.inspect(engine).get_table_names() else None


def install() -> None:
    """Make this process's new sqlite stores copies of `template_path()` (made by the first one; several processes may
    share the cache: a lock file makes one of them make it). Idempotent."""
    import mlflow.store.db.utils as db_utils

    original = getattr(db_utils, "_initialize_tables", None)
    if original is None or getattr(original, "from_template", False):
        return

    def initialize_tables(engine) -> None:
        database = _new_sqlite_file(engine)
        if database is None or os.environ.get(OPT_OUT) == "0":
            return original(engine)
        template = template_path()
        with contextlib.ExitStack() as held:
            try:
                template.parent.mkdir(parents=True, exist_ok=True)
                held.enter_context(locked(template.with_name(template.name + ".lock")))
            except OSError as exc:  # a read-only cache: MLflow migrates this store itself
                log.debug("no MLflow store template at %s (%s)", template, exc)
                return original(engine)
            if not template.exists():
                original(engine)
                _save_template(database, template)
                return None
            engine.dispose()  # no pooled connection keeps the empty schema it read
            copy_database(template, database)
        return None

    initialize_tables.from_template = True
    initialize_tables.__wrapped__ = original  # MLflow's own, for a caller that wants its migrations
    db_utils._initialize_tables = initialize_tables


def _save_template(database: Path, template: Path) -> None:
    """`database`, just migrated and still empty, as the template (written beside it and renamed: a reader never sees
    half of one); a cache that cannot take it only costs the next store its migrations."""
    partial = template.with_name(f"{template.name}.{os.getpid()}.tmp")
    try:
        copy_database(database, partial)
        os.replace(partial, template)
    except (OSError, sqlite3.Error) as exc:
        log.debug("MLflow store template not saved at %s (%s)", template, exc)
        partial.unlink(missing_ok=True)
