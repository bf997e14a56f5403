"""Crash and resume: one run is killed with SIGKILL five times, at a different kind of point each time, and resumed
after each kill; it ends with the metrics (metrics.jsonl and MLflow) of a run that was never interrupted.

Kills, in order (each resumed process continues where the previous one's last complete checkpoint left off):
  1 during generation             HACRL_CRASH_AT=generate:5   (step 2's rollouts)
  2 mid-update                    HACRL_CRASH_AT=update:10    (between two optimizer steps of step 3)
  3 during a checkpoint write     HACRL_CRASH_AT=checkpoint:2 (files written, not yet renamed into place)
  4 during MLflow logging         HACRL_CRASH_AT=mlflow:2     (between two log_batch calls of one flush)
  5 from outside, at a random time (seeded delay after the process's first checkpoint): `kill -9`
After each kill: every checkpoint folder loads (safetensors, weights_only), `latest` names a complete one, a half-
written checkpoint is never taken for one. The MLflow runs are continued, never duplicated, and no metric holds a
step twice. See hacrl_exp/faults.py for the crash points.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hacrl_exp.faults import CRASH_ENV
from hacrl_exp.trainer.checkpoint import LATEST, find_checkpoint
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import is_timing_key, read_metrics
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides

STEPS = 8
OVERRIDES = [*tiny_overrides("pair", STEPS), "trainer.checkpoint_every=1", "trainer.keep_checkpoints=2"]
CRASHES = ["generate:5", "update:10", "checkpoint:2", "mlflow:2"]
KILL_SEED = 7
TOLERANCE = 1e-6


def deterministic(rows: list[dict]) -> dict[tuple, float]:
    """(step, agent, metric) -> value of metrics.jsonl rows, wall-clock times left out."""
    return {
        (r["step"], r["agent"], k): v
        for r in rows
        for k, v in r.items()
        if k not in ("step", "agent") and not is_timing_key(k)
    }


def mlflow_histories(store: str, experiment: str) -> dict[str, dict]:
    """{role/agent: {'run_id', 'status', 'metrics': {key: [(step, value), ...]}}} of one experiment's runs."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    out = {}
    for run in runs:
        name = run.data.tags.get("agent", "")
        assert name not in out, f"two MLflow runs for {name or 'the parent'}: the run was duplicated"
        metrics = {
            key: sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
            for key in run.data.metrics
            if not is_timing_key(key)
        }
        out[name] = {"run_id": run.info.run_id, "status": run.info.status, "metrics": metrics}
    return out


def check_checkpoints(run: Path) -> int:
    """Every published checkpoint is complete and loads; returns the step `latest` resumes from."""
    root = run / "checkpoints"
    steps = sorted(root.glob("step_*"))
    assert 1 <= len(steps) <= 3, steps  # keep_checkpoints=2, +1 when killed between publishing and rotating
    for folder in steps:
        state = json.loads((folder / "state.json").read_text())
        assert state["step"] == int(folder.name.removeprefix("step_"))
        for agent in ("opt_char", "gpt2_bpe"):
            weights = load_file(folder / "agents" / agent / "model.safetensors")
            assert weights and all(torch.isfinite(t).all() for t in weights.values())
            torch.load(folder / "optim" / f"{agent}.pt", weights_only=True)
        for path in [folder / "rng.pt", *sorted((folder / "rng").glob("*.pt"))]:
            torch.load(path, weights_only=True)
    latest = find_checkpoint(run)
    assert latest is not None and latest.parent == root and (root / LATEST).read_text().strip() == latest.name
    return int(latest.name.removeprefix("step_"))


def launch(run: Path, store: str, env: dict, crash: str | None = None) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "hacrl_exp.run",
        *OVERRIDES,
        f"trainer.output_dir={run}",
        f"hydra.run.dir={run.parent / 'hydra'}",
        f"tracking.uri={store}",
        "tracking.experiment=crashed",
    ]
    if (run / "checkpoints").exists():
        command.append(f"trainer.resume={run}")
    env = {**env, CRASH_ENV: crash} if crash else env
    return subprocess.Popen(command, env=env, cwd=run.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def kill_at_random_time(process: subprocess.Popen, run: Path, after_step: int) -> float:
    """SIGKILL the process a seeded random delay after it published its first checkpoint past `after_step`."""
    deadline = time.monotonic() + 300
    while find_checkpoint(run) is None or int(find_checkpoint(run).name[5:]) <= after_step:
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    delay = random.Random(KILL_SEED).uniform(0.0, 0.3)
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    return delay


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('crash_store') / 'mlflow.db'}"


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    cache = tmp_path_factory.getbasetemp() / "warm_start_cache"  # the warm-start cache of tests/conftest.py
    return {**os.environ, "HACRL_CACHE_DIR": str(cache)}


def uninterrupted(run: Path, store: str, env: dict) -> tuple[dict, list[dict], dict]:
    """The run never killed (same seed and config), in this process: summary, metrics rows, MLflow histories."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HACRL_CACHE_DIR", env["HACRL_CACHE_DIR"])
        summary = train(preflight([*OVERRIDES, f"tracking.uri={store}", "tracking.experiment=reference"]), run)
    return summary, read_metrics(run / "metrics.jsonl"), mlflow_histories(store, "reference")


@pytest.fixture(scope="module")
def reference(tmp_path_factory, store, env):
    return uninterrupted(tmp_path_factory.mktemp("reference"), store, env)


def kill_five_times(run: Path, store: str, env: dict) -> list[dict]:
    """Start, kill and check the run five times (CRASHES, then a random kill); one record per kill."""
    run.mkdir(parents=True, exist_ok=True)
    kills, run_ids = [], None
    for crash in [*CRASHES, "random"]:
        before = check_checkpoints(run) if (run / "checkpoints").exists() else 0
        started = time.monotonic()
        process = launch(run, store, env, None if crash == "random" else crash)
        delay = kill_at_random_time(process, run, before) if crash == "random" else None
        stderr = process.communicate(timeout=600)[1].decode()
        assert process.returncode == -signal.SIGKILL, f"{crash}: exit {process.returncode}, {stderr[-2000:]}"
        assert not (run / "summary.json").exists()
        step = check_checkpoints(run)
        assert before <= step < STEPS, (crash, before, step)
        state = json.loads((run / "checkpoints" / f"step_{step:06d}" / "state.json").read_text())
        assert run_ids in (None, state["run_ids"])  # the same MLflow runs, kill after kill
        run_ids = state["run_ids"]
        leftover = sorted(p.name for p in (run / "checkpoints").glob(".tmp_step_*"))
        if crash.startswith("checkpoint"):  # the half-written checkpoint is there, but not taken for one
            assert leftover == [f".tmp_step_{step + 1:06d}"]
        kills.append(
            {"fault": crash, "delay_s": delay, "exit": process.returncode, "resumes_from": step, "leftover": leftover}
        )
        kills[-1]["seconds"] = time.monotonic() - started
    return kills


def resume_to_the_end(run: Path, store: str, env: dict) -> dict:
    """The last resume, in this process: it runs to the end."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HACRL_CACHE_DIR", env["HACRL_CACHE_DIR"])
        config = preflight(
            [*OVERRIDES, f"tracking.uri={store}", "tracking.experiment=crashed", f"trainer.resume={run}"]
        )
        return train(config, run.parent / "ignored")


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
