"""executor=ray: agents as Ray actors give the same run as executor=local, on a private Ray bound to 127.0.0.1;
hydra/launcher=hacrl_ray runs a multirun's jobs as Ray tasks."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import is_timing_key, read_metrics
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides

pytest.importorskip("ray", reason="ray is not installed (pip install 'hacrl_exp[ray]')")
pytest.importorskip("psutil", reason="psutil is not installed (the dev extra has it)")

REPO = Path(__file__).resolve().parents[2]
LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-6
    return a == b


def listening_addresses() -> set[str]:
    """IP addresses that this process and its children (a private Ray's GCS, raylet, workers) listen on."""
    import psutil

    me = psutil.Process()
    pids = {me.pid} | {child.pid for child in me.children(recursive=True)}
    return {c.laddr.ip for c in psutil.net_connections("inet") if c.status == "LISTEN" and c.pid in pids}


OVERRIDES = [*tiny_overrides("pair", steps=2), "tracking.backend=none", "trainer.eval_every=1",
             "trainer.checkpoint_every=1"]  # fmt: skip


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> tuple[Path, dict]:
    """The reference both Ray runs are held to: the same config, executor=local, in this process (folder, summary)."""
    run = tmp_path_factory.mktemp("local") / "run"
    return run, train(preflight(OVERRIDES), run)


def test_ray_actors_match_in_process_agents(tmp_path, local_run):
    import ray

    local_dir, local = local_run
    seen = {}

    def inspect_ray(step, metrics):  # runs between steps, while the private Ray is up
        seen["addresses"] = listening_addresses()
        seen["nodes"] = [node["NodeManagerAddress"] for node in ray.nodes()]
        return False

    remote = train(preflight([*OVERRIDES, "executor=ray"]), tmp_path / "ray", on_evaluate=inspect_ray)

    assert seen["addresses"] and seen["addresses"] <= LOOPBACK, seen["addresses"]  # nothing on other interfaces
    assert seen["nodes"] == ["127.0.0.1"]
    assert not ray.is_initialized()  # the run's private Ray is gone
    rows = {"local": read_metrics(local_dir / "metrics.jsonl"), "ray": read_metrics(tmp_path / "ray" / "metrics.jsonl")}
    assert len(rows["local"]) == len(rows["ray"]) > 0
    compared = 0
    for a, b in zip(rows["local"], rows["ray"]):
        assert a.keys() == b.keys()
        for key in a:
            if not is_timing_key(key):
                assert same(a[key], b[key]), (a["step"], a["agent"], key, a[key], b[key])
                compared += 1
    assert compared > 100
    assert any("cross/from_gpt2_bpe/rows_run" in r for r in rows["ray"])  # cross blocks were built from shared rollouts
    assert json.dumps(local["evals"]) == json.dumps(remote["evals"])
    assert local["counters"] == remote["counters"]
    for name in ("opt_char", "gpt2_bpe"):  # per-problem eval records and checkpoints written by the actors
        path = Path("eval") / "step_000002" / f"{name}.jsonl"
        assert (tmp_path / "ray" / path).read_text() == (local_dir / path).read_text()
        step = tmp_path / "ray" / "checkpoints" / "step_000002"
        assert (step / "agents" / name / "model.safetensors").is_file() and (step / "rng" / f"{name}.pt").is_file()


def test_a_ray_run_stopped_and_resumed_matches_an_uninterrupted_local_run(tmp_path, local_run):
    """Each run starts and shuts down its own private Ray, as a rerun with trainer.resume does."""
    local_dir, _ = local_run
    cut = train(preflight([*OVERRIDES, "executor=ray", "trainer.stop_after=1"]), tmp_path / "ray")
    assert cut["last_step"] == 1
    resumed = train(preflight([*OVERRIDES, "executor=ray", f"trainer.resume={tmp_path / 'ray'}"]), tmp_path / "x")
    assert resumed["last_step"] == 2 and resumed["output_dir"] == str(tmp_path / "ray")
    rows = {"local": read_metrics(local_dir / "metrics.jsonl"), "ray": read_metrics(tmp_path / "ray" / "metrics.jsonl")}
    assert [(r["step"], r["agent"]) for r in rows["local"]] == [(r["step"], r["agent"]) for r in rows["ray"]]
    for a, b in zip(rows["local"], rows["ray"]):
        for key in (k for k in a if not is_timing_key(k)):
            assert same(a[key], b[key]), (a["step"], a["agent"], key, a[key], b[key])


def test_hydra_multirun_runs_its_jobs_as_ray_tasks(tmp_path):
    """Two jobs side by side, both logging to one new MLflow store (the launcher creates it first)."""
    import mlflow

    sweep = tmp_path / "sweep"
    overrides = [*tiny_overrides("pair", steps=1), "tracking.log_models=false", "trainer.eval_limit=2"]
    overrides.append("algorithm=hacpo,gspo")
    command = [sys.executable, "-m", "hacrl_exp.run", "-m", "hydra/launcher=hacrl_ray", f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command + overrides, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Launching 2 jobs on Ray" in done.stdout + done.stderr
    for job, algorithm in enumerate(("hacpo", "gspo")):  # same seed: the warm starts cached by the test above
        summary = json.loads((sweep / str(job) / "summary.json").read_text())
        assert summary["last_step"] == 1
        assert json.loads((sweep / str(job) / "config.json").read_text())["algorithm"]["name"] == algorithm
        client = mlflow.MlflowClient(os.environ["MLFLOW_TRACKING_URI"])  # the jobs' store (tests/conftest.py)
        assert client.get_run(summary["run_ids"][""]).info.status == "FINISHED"


def test_actors_that_cannot_fit_the_cluster_are_a_config_error():
    from hacrl_exp.config.schema import ExecutorConfig
    from hacrl_exp.errors import ConfigError
    from hacrl_exp.trainer.executor import _check_fits

    _check_fits({"CPU": 2.0}, 2, ExecutorConfig(cpus_per_agent=1))
    with pytest.raises(ConfigError, match=r"cpus_per_agent=1 × 3 agents needs 3 CPUs but the Ray cluster has 2"):
        _check_fits({"CPU": 2.0}, 3, ExecutorConfig(cpus_per_agent=1))
    with pytest.raises(ConfigError, match="lower executor.gpus_per_agent"):
        _check_fits({"CPU": 8.0}, 2, ExecutorConfig(gpus_per_agent=1))


def test_ranks_a_private_ray_cannot_place_exit_2_with_one_line(tmp_path):
    """Found after Ray and the MLflow store started: still one line on stderr (no store or Ray notices), exit 2."""
    overrides = ["executor=ray", "executor.num_cpus=2", "agents.members.opt_char.world_size=2",
                 "agents.members.opt_char.warm_start.steps=0", "agents.members.gpt2_bpe.warm_start.steps=0",
                 f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"hydra.run.dir={tmp_path}/run"]  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "hacrl_exp.run", *overrides], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("ConfigError: executor.cpus_per_agent=1 × 3 agent ranks needs 3 CPUs but the Ray")
