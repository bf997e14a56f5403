"""New MLflow sqlite stores in the test process start from one migrated per session, not from MLflow's migrations.

MLflow creates a sqlite store by running its ~60 alembic revisions, most of them table rebuilds: 3-10 s on the 2-core
CI machine, paid by every test that trains, evaluates or reports into a store of its own (hundreds). The first store a
session creates is migrated by MLflow as usual and saved, still empty, as the template; every later new store gets the
template's pages through SQLite's backup API (0.1 s). It is the same database MLflow's migrations give (same version,
same schema, no rows: MLflow adds the Default experiment afterwards, with the store's own artifact folder), so the
stores stay real; only the time to build the schema goes. Processes a test starts (`python -m ...`) migrate their own
stores as users' do.

`install(folder)` wraps `mlflow.store.db.utils._initialize_tables`, which MLflow's SqlAlchemyStore calls only for a
database without its tables; other databases (servers, a half-migrated file) go to MLflow's own function.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from hacrl_exp.paths import locked

TEMPLATE = "mlflow_template.db"


def _copy(source: Path, target: Path) -> None:
    """Every page of the sqlite database `source` into `target` (SQLite's online backup: safe while `target` is open
    elsewhere, as MLflow's engine holds it)."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def _is_empty_sqlite_file(engine) -> str | None:
    """The path of `engine`'s database when it is a sqlite file without any table yet, else None."""
    import sqlalchemy

    database = engine.url.database
    if engine.url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    return database if not sqlalchemy.inspect(engine).get_table_names() else None


def install(folder: Path) -> None:
    """Make new sqlite stores of this process copies of `folder`/TEMPLATE (created by the first one; the folder may
    be shared by several processes: a lock file makes one of them create it)."""
    import mlflow.store.db.utils as db_utils

    original = db_utils._initialize_tables
    if getattr(original, "from_template", False):
        return
    template = folder / TEMPLATE

    def initialize_tables(engine) -> None:
        database = _is_empty_sqlite_file(engine)
        if database is None:
            return original(engine)
        with locked(folder / (TEMPLATE + ".lock")):
            if not template.exists():
                original(engine)
                partial = template.with_suffix(f".{os.getpid()}.tmp")
                _copy(Path(database), partial)
                os.replace(partial, template)
                return None
        engine.dispose()  # no pooled connection keeps the empty schema it read
        _copy(template, Path(database))
        return None

    initialize_tables.from_template = True
    db_utils._initialize_tables = initialize_tables
