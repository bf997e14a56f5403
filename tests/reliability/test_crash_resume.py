"""Crash and resume: one run is killed with SIGKILL five times, at a different kind of point each time, and resumed
after each kill; it ends with the metrics (metrics.jsonl and MLflow) of a run that was never interrupted. The drill
(kills in order, resumes, checkpoint checks) is hacrl_exp/crash_drill.py, which benchmarks.reliability reports too.

After each kill: every checkpoint folder loads (safetensors, weights_only), `latest` names a complete one, a half-
written checkpoint is never taken for one. The MLflow runs are continued, never duplicated, and no metric holds a
step twice. See hacrl_exp/faults.py for the crash points.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hacrl_exp.crash_drill import (
    STEPS,
    check_checkpoints,
    deterministic,
    kill_five_times,
    mlflow_histories,
    resume_to_the_end,
    uninterrupted,
)
from hacrl_exp.trainer.checkpoint import LATEST, find_checkpoint
from hacrl_exp.trainer.metrics import read_metrics

TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('crash_store') / 'mlflow.db'}"


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    cache = tmp_path_factory.getbasetemp() / "warm_start_cache"  # the warm-start cache of tests/conftest.py
    return {**os.environ, "HACRL_CACHE_DIR": str(cache)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory, store, env):
    return uninterrupted(tmp_path_factory.mktemp("reference"), store, env)


def test_killed_five_times_resumes_to_the_uninterrupted_metrics(tmp_path, store, env, reference):
    ref_summary, ref_rows, ref_mlflow = reference
    run = tmp_path / "run"
    kills = kill_five_times(run, store, env)
    assert [k["resumes_from"] for k in kills[:4]] == [1, 2, 3, 4]  # each crash point hit where planned
    run_ids = json.loads((find_checkpoint(run) / "state.json").read_text())["run_ids"]
    summary = resume_to_the_end(run, store, env)
    assert summary["last_step"] == STEPS and summary["run_ids"] == run_ids and summary["output_dir"] == str(run)
    assert summary["counters"] == ref_summary["counters"]

    # no checkpoint lost or corrupt, none left half-written, old ones rotated
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["latest", "step_000007", "step_000008"]
    assert check_checkpoints(run) == STEPS

    # metrics.jsonl: every row once, equal to the uninterrupted run's
    rows = read_metrics(run / "metrics.jsonl")
    keys = [(r["step"], r["agent"], k) for r in rows for k in r if k not in ("step", "agent")]
    assert len(keys) == len(set(keys)), "a metric was logged twice for one step"
    assert len(rows) == len(ref_rows)
    got, want = deterministic(rows), deterministic(ref_rows)
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=TOLERANCE, abs=TOLERANCE), key

    # MLflow: the same three runs, finished, each metric's history equal to the uninterrupted run's (no step twice)
    crashed = mlflow_histories(store, "crashed")
    assert {name: r["run_id"] for name, r in crashed.items()} == run_ids
    assert {r["status"] for r in crashed.values()} == {"FINISHED"}
    assert crashed.keys() == ref_mlflow.keys()
    for name, ref_run in ref_mlflow.items():
        assert crashed[name]["metrics"].keys() == ref_run["metrics"].keys(), name
        for key, history in ref_run["metrics"].items():
            steps = [s for s, _ in crashed[name]["metrics"][key]]
            assert steps == [s for s, _ in history], (name, key, steps)
            assert [v for _, v in crashed[name]["metrics"][key]] == pytest.approx(
                [v for _, v in history], rel=TOLERANCE, abs=TOLERANCE
            ), (name, key)


def test_a_kill_between_publishing_and_pointing_latest(tmp_path):
    """The step folder is renamed into place before `latest` names it: without a usable pointer the newest
    complete folder is the checkpoint; a half-written temporary folder never is, and the next save removes it."""
    from hacrl_exp.trainer.checkpoint import save_checkpoint

    def write_agents(folder: Path) -> None:
        (folder / "agents").mkdir()

    root = tmp_path / "checkpoints"
    for step in (1, 2):
        save_checkpoint(root, step, write_agents, {"run_ids": {}}, keep=2)
    (root / ".tmp_step_000003").mkdir()  # killed while writing checkpoint 3
    (root / LATEST).unlink()  # killed before `latest` named checkpoint 2
    assert find_checkpoint(tmp_path) == root / "step_000002"
    (root / LATEST).write_text("step_000009")  # a pointer to a folder that is gone
    assert find_checkpoint(tmp_path) == root / "step_000002"
    save_checkpoint(root, 3, write_agents, {"run_ids": {}}, keep=2)
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_000002", "step_000003"]


def test_a_metrics_line_cut_short_by_a_kill_is_dropped_on_resume(tmp_path):
    from hacrl_exp.trainer.metrics import MetricsLog

    path = tmp_path / "metrics.jsonl"
    rows = [json.dumps({"step": s, "agent": "", "x": s}) for s in (1, 2, 3)]
    path.write_text("\n".join(rows) + '\n{"step": 4, "agent": "", "x"')  # the kill came mid-write
    MetricsLog(path, truncate_after=2)  # resuming from the checkpoint of step 2
    assert read_metrics(path) == [{"step": 1, "agent": "", "x": 1}, {"step": 2, "agent": "", "x": 2}]
