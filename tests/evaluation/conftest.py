"""Shared fixtures: the benchmark data folder (skips without it), a grader pool, and one tiny trained run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hacrl_exp.evaluation.grading import Scorer

DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data"
"""../shared/data relative to the repository root; tests that need it skip when it is absent."""


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA_DIR / "math500.jsonl").is_file():
        pytest.skip(f"benchmark data not found at {DATA_DIR} (../shared/data relative to the repo root)")
    return DATA_DIR


@pytest.fixture(scope="session")
def scorer():
    """One warm grader pool for the whole session (spawning workers costs ~1-2 s)."""
    with Scorer(timeout_s=5.0, workers=1) as s:
        s.math.start()
        yield s


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> dict:
    """A two-step training run of the tiny pair (checkpoints at steps 1 and 2), tracked in its own MLflow store.

    Session-scoped, so the per-test environment of tests/conftest.py is not set yet: the store and the warm-start
    cache are passed explicitly (the cache folder is the one the other tests share).
    """
    from hacrl_exp.config.preflight import preflight
    from hacrl_exp.trainer.loop import train
    from tests.e2e.tiny import tiny_overrides

    root = tmp_path_factory.mktemp("tiny_run")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cache = tmp_path_factory.getbasetemp() / "warm_start_cache"
    overrides = tiny_overrides("pair", 2) + [
        "trainer.checkpoint_every=1",
        "trainer.keep_checkpoints=3",
        f"trainer.cache_dir={cache}",
        f"tracking.uri={uri}",
        "tracking.log_models=false",
    ]
    summary = train(preflight(overrides), root / "run")
    _forget_global_tracking_uri()  # the tracker calls mlflow.set_tracking_uri; later tests use their own stores
    state = json.loads((root / "run" / "checkpoints" / "step_000002" / "state.json").read_text())
    return {"run_dir": root / "run", "uri": uri, "run_ids": summary["run_ids"], "state": state}


def _forget_global_tracking_uri() -> None:
    import mlflow.tracking._tracking_service.utils as tracking_utils

    tracking_utils._tracking_uri = None
