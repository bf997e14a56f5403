"""New sqlite MLflow stores start from a migrated template (hacrl_exp/tracking/store_template.py): the same database
MLflow's own migrations give, a working store, and MLflow's own path wherever no template can be kept."""

import sqlite3
from pathlib import Path

import mlflow.store.db.utils as db_utils
import pytest
from mlflow.tracking import MlflowClient

from hacrl_exp.tracking import store_template
from hacrl_exp.tracking.store import prepare_mlflow


def clauses(sql: str | None) -> list[str]:
    """A CREATE statement's lines without their commas, sorted: MLflow's own migrations write a table's constraints in
    an order that changes from one process to the next (a Python set's), so two stores it migrated differ in it."""
    return sorted(line.strip().rstrip(",") for line in (sql or "").splitlines())


def schema(database: Path) -> tuple[list, list]:
    """(every table, index and trigger with its SQL's clauses, the alembic revision rows) of a sqlite file."""
    with sqlite3.connect(database) as connection:
        query = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        objects = connection.execute(query).fetchall()
        revision = connection.execute("SELECT * FROM alembic_version").fetchall()
    connection.close()
    return [(kind, name, table, clauses(sql)) for kind, name, table, sql in objects], revision


def rows(database: Path) -> dict[str, int]:
    """Rows per table, tables with rows only."""
    with sqlite3.connect(database) as connection:
        tables = [t for (t,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        counts = {t: connection.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables}
    connection.close()
    return {t: n for t, n in counts.items() if n and t != "alembic_version"}


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    """A cache of this test's own: the first new store makes the template."""
    monkeypatch.setenv("HACRL_CACHE_DIR", str(tmp_path / "cache"))
    prepare_mlflow()
    return tmp_path / "cache"


def test_the_template_is_the_store_mlflow_migrates_itself_and_a_copy_works(tmp_path, own_cache):
    first, second = tmp_path / "a" / "mlflow.db", tmp_path / "b" / "mlflow.db"
    for database in (first, second):
        database.parent.mkdir()
        MlflowClient(f"sqlite:///{database}").search_experiments()
    template = store_template.template_path()
    assert template.parent.parent == own_cache and template.is_file()
    assert schema(template)[1], "the template carries MLflow's alembic revision"

    import sqlalchemy

    by_mlflow = tmp_path / "by_mlflow.db"
    engine = sqlalchemy.create_engine(f"sqlite:///{by_mlflow}")
    db_utils._initialize_tables.__wrapped__(engine)  # MLflow's own migrations, not the template
    engine.dispose()
    assert schema(second) == schema(by_mlflow) == schema(template)
    assert rows(template) == rows(by_mlflow), "the rows MLflow's migrations write (its default workspace), no more"
    assert "experiments" not in rows(template), "MLflow adds each new store's Default experiment itself"

    client = MlflowClient(f"sqlite:///{second}")
    (default,) = client.search_experiments()
    assert (default.name, default.experiment_id) == ("Default", "0")
    run = client.create_run(default.experiment_id)
    client.log_metric(run.info.run_id, "reward/mean", 0.5, step=3)
    assert client.get_metric_history(run.info.run_id, "reward/mean")[0].value == 0.5
    assert rows(first) == {**rows(template), "experiments": 1}, "the first store: the template and its Default"


def test_a_cache_that_cannot_be_written_leaves_the_migrations_to_mlflow(tmp_path, monkeypatch):
    blocked = tmp_path / "a_file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("HACRL_CACHE_DIR", str(blocked))
    prepare_mlflow()
    database = tmp_path / "mlflow.db"
    client = MlflowClient(f"sqlite:///{database}")
    assert [e.name for e in client.search_experiments()] == ["Default"]
    assert schema(database)[1], "MLflow migrated it itself"
    assert blocked.read_text() == "not a folder"


def test_the_opt_out_leaves_every_new_store_to_mlflow(tmp_path, own_cache, monkeypatch):
    monkeypatch.setenv(store_template.OPT_OUT, "0")
    database = tmp_path / "mlflow.db"
    MlflowClient(f"sqlite:///{database}").search_experiments()
    assert schema(database)[1] and not own_cache.exists()
