"""Test-wide settings: offline hub, quiet progress bars, and caches/stores in temporary folders."""

import os
import sys

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
