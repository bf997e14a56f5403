"""Shared fixtures: one tiny trained run (the data folder and the grader fixtures live in tests/conftest.py)."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> dict:
    """A two-step training run of the tiny pair (checkpoints at steps 1 and 2), tracked in its own MLflow store.

    Session-scoped, so the per-test environment of tests/conftest.py is not set yet: the store and the warm-start
    cache are passed explicitly (the cache folder is the one the other tests share).
    """
    from hacrl_exp.trainer.loop import train
    from hacrl_exp.trainer.validate import preflight
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
