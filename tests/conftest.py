"""Test-wide settings: offline hub, quiet progress bars, and caches/stores in temporary folders."""

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _isolated_stores(tmp_path_factory, monkeypatch):
    """Each test gets its own MLflow store; warm starts share one cache per session (they are pure)."""
    store = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{store / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    if "mlflow" in sys.modules:  # an earlier test's run set mlflow's process-wide URI, which outranks the variable
        sys.modules["mlflow"].set_tracking_uri(uri)
    cache = tmp_path_factory.getbasetemp() / "warm_start_cache"
    monkeypatch.setenv("HACRL_CACHE_DIR", str(cache))


DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
"""../shared/data relative to the repository root; tests that need it skip when it is absent."""


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA_DIR / "math500.jsonl").is_file():
        pytest.skip(f"benchmark data not found at {DATA_DIR} (../shared/data relative to the repo root)")
    return DATA_DIR


@pytest.fixture(scope="session")
def grader():
    """One warm grader for the whole session (spawning workers costs ~1-2 s)."""
    from hacrl_exp.rewards import Grader

    with Grader(timeout_s=5.0, workers=1) as g:
        g.start()
        yield g
