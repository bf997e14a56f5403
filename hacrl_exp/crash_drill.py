"""The crash-and-resume drill of docs/reliability.md: one tiny run killed with SIGKILL five times, at a different kind
of point each time (hacrl_exp.faults), resumed after each kill, and compared with a run never interrupted.

A test harness, not a feature, like hacrl_exp.faults: tests/reliability/test_crash_resume.py asserts on what it
returns and `python -m benchmarks.reliability` reports it; other reliability tests use its readers (`deterministic`,
`mlflow_histories`, `check_checkpoints`). A broken expectation inside the drill raises DrillError.

Kills, in order (each resumed process continues where the previous one's last complete checkpoint left off):
  1 during generation             HACRL_CRASH_AT=generate:5   (step 2's rollouts)
  2 mid-update                    HACRL_CRASH_AT=update:10    (between two optimizer steps of step 3)
  3 during a checkpoint write     HACRL_CRASH_AT=checkpoint:2 (files written, not yet renamed into place)
  4 during MLflow logging         HACRL_CRASH_AT=mlflow:2     (between two log_batch calls of one flush)
  5 from outside, at a random time (seeded delay after the process's first checkpoint): `kill -9`
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import load_file

from hacrl_exp.config.presets import tiny_overrides
from hacrl_exp.faults import CRASH_ENV
from hacrl_exp.trainer.checkpoint import LATEST, find_checkpoint
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import is_timing_key, read_metrics
from hacrl_exp.trainer.validate import preflight

STEPS = 8
OVERRIDES = [*tiny_overrides("pair", STEPS), "trainer.checkpoint_every=1", "trainer.keep_checkpoints=2"]
CRASHES = ["generate:5", "update:10", "checkpoint:2", "mlflow:2"]
KILL_SEED = 7
CACHE_ENV = "HACRL_CACHE_DIR"


class DrillError(AssertionError):
    """The drill saw what a crash must not leave: a lost or corrupt checkpoint, a duplicated run, a wrong exit."""


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
        if name in out:
            raise DrillError(f"two MLflow runs for {name or 'the parent'}: the run was duplicated")
        metrics = {
            key: sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
            for key in run.data.metrics
            if not is_timing_key(key)
        }
        out[name] = {"run_id": run.info.run_id, "status": run.info.status, "metrics": metrics}
    return out


def check_checkpoints(run: Path, agents: tuple[str, ...] = ("opt_char", "gpt2_bpe")) -> int:
    """Every published checkpoint is complete and loads; returns the step `latest` resumes from."""
    root = run / "checkpoints"
    steps = sorted(root.glob("step_*"))
    if not 1 <= len(steps) <= 3:  # keep_checkpoints=2, +1 when killed between publishing and rotating
        raise DrillError(f"{len(steps)} checkpoint folders in {root}: {[p.name for p in steps]}")
    for folder in steps:
        state = json.loads((folder / "state.json").read_text())
        if state["step"] != int(folder.name.removeprefix("step_")):
            raise DrillError(f"{folder} holds the state of step {state['step']}")
        for agent in agents:
            weights = load_file(folder / "agents" / agent / "model.safetensors")
            if not weights or not all(torch.isfinite(t).all() for t in weights.values()):
                raise DrillError(f"{folder}: {agent}'s weights are empty or not finite")
            torch.load(folder / "optim" / f"{agent}.pt", weights_only=True)
        for path in [folder / "rng.pt", *sorted((folder / "rng").glob("*.pt"))]:
            torch.load(path, weights_only=True)
    latest = find_checkpoint(run)
    if latest is None or latest.parent != root or (root / LATEST).read_text().strip() != latest.name:
        raise DrillError(f"{root / LATEST} does not name the newest complete checkpoint ({latest})")
    return int(latest.name.removeprefix("step_"))


def launch(run: Path, store: str, env: dict, crash: str | None = None) -> subprocess.Popen:
    """`python -m hacrl_exp.run` of the drill's run (a resume when it has checkpoints), crashing at `crash`."""
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
        if process.poll() is not None:
            raise DrillError(f"the run ended before a checkpoint: {process.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            raise DrillError(f"no checkpoint past step {after_step} in 300 s")
        time.sleep(0.01)
    delay = random.Random(KILL_SEED).uniform(0.0, 0.3)
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    return delay


@contextmanager
def warm_start_cache(env: dict) -> Iterator[None]:
    """This process's warm-start cache set to `env`'s for the block (the drill's child processes use env's)."""
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = env[CACHE_ENV]
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = before


def uninterrupted(run: Path, store: str, env: dict) -> tuple[dict, list[dict], dict]:
    """The run never killed (same seed and config), in this process: summary, metrics rows, MLflow histories."""
    with warm_start_cache(env):
        summary = train(preflight([*OVERRIDES, f"tracking.uri={store}", "tracking.experiment=reference"]), run)
    return summary, read_metrics(run / "metrics.jsonl"), mlflow_histories(store, "reference")


def kill_five_times(run: Path, store: str, env: dict) -> list[dict]:
    """Start, kill and check the run five times (CRASHES, then a random kill); one record per kill:
    fault, delay_s (the random kill's), exit, resumes_from (the step of the checkpoint left), leftover, seconds."""
    run.mkdir(parents=True, exist_ok=True)
    kills, run_ids = [], None
    for crash in [*CRASHES, "random"]:
        before = check_checkpoints(run) if (run / "checkpoints").exists() else 0
        started = time.monotonic()
        process = launch(run, store, env, None if crash == "random" else crash)
        delay = kill_at_random_time(process, run, before) if crash == "random" else None
        stderr = process.communicate(timeout=600)[1].decode()
        if process.returncode != -signal.SIGKILL:
            raise DrillError(f"{crash}: exit {process.returncode}, not SIGKILL: {stderr[-2000:]}")
        if (run / "summary.json").exists():
            raise DrillError(f"{crash}: the killed run wrote its summary")
        step = check_checkpoints(run)
        if not before <= step < STEPS:
            raise DrillError(f"{crash}: resumes from step {step}, the previous process left step {before}")
        state = json.loads((run / "checkpoints" / f"step_{step:06d}" / "state.json").read_text())
        if run_ids not in (None, state["run_ids"]):
            raise DrillError(f"{crash}: MLflow runs {state['run_ids']}, not the same runs {run_ids}")
        run_ids = state["run_ids"]
        leftover = sorted(p.name for p in (run / "checkpoints").glob(".tmp_step_*"))
        if crash.startswith("checkpoint") and leftover != [f".tmp_step_{step + 1:06d}"]:
            raise DrillError(f"{crash}: the half-written checkpoint is not the one left: {leftover}")
        kills.append(
            {"fault": crash, "delay_s": delay, "exit": process.returncode, "resumes_from": step, "leftover": leftover}
        )
        kills[-1]["seconds"] = time.monotonic() - started
    return kills


def resume_to_the_end(run: Path, store: str, env: dict) -> dict:
    """The last resume, in this process: it runs to the end."""
    with warm_start_cache(env):
        config = preflight(
            [*OVERRIDES, f"tracking.uri={store}", "tracking.experiment=crashed", f"trainer.resume={run}"]
        )
        return train(config, run.parent / "ignored")
