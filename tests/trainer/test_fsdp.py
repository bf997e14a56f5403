"""Sharded agents (FSDP2 over a gloo rank group of Ray actors), placed on named nodes of a (simulated) two-node Ray
cluster (one agent's two ranks on different nodes), land there and give the run of unsharded ones, generating
data-parallel over their ranks (the counter sampler, rollout.hf); a sharded run killed with SIGKILL resumes to the
unsharded run's metrics.

Every run is the tiny pair of tests/e2e/tiny.py, shrunk further (2 prompts × G 4, 16 new tokens), float32 on CPU.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hacrl_exp.faults import CRASH_ENV
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import is_timing_key, read_metrics
from hacrl_exp.trainer.params import learner_params
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides

pytest.importorskip("ray", reason="ray is not installed (pip install 'hacrl_exp[ray]')")

REPO = Path(__file__).resolve().parents[2]
STEPS = 3
BASE = [
    *tiny_overrides("pair", steps=STEPS),
    "trainer.prompts_per_step=2",
    "rollout.max_new_tokens=16",
    "task.eval_per_tier=4",
    "trainer.eval_limit=4",
    "trainer.eval_every=3",
    "tracking.backend=none",
]
SHARDED = ["executor=ray", "executor.num_cpus=3", "agents.members.opt_char.world_size=2"]  # 2 + 1 actors


def same(x, y) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        # 1e-5: float32 reductions in another order (the gradient norm over the ranks' shards) differ at ~1e-6
        return (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-5, abs=1e-9)
    return x == y


def compared(rows_a: list[dict], rows_b: list[dict]) -> int:
    """Assert two metrics.jsonl files hold the same rows and values (wall-clock times, per-rank memory and a sharded
    agent's per-rank costs aside); return how many values were compared."""
    assert [(r["step"], r["agent"]) for r in rows_a] == [(r["step"], r["agent"]) for r in rows_b]
    n = 0
    for a, b in zip(rows_a, rows_b):
        keys = {k for k in a if not is_timing_key(k) and not k.startswith(("memory/", "cost/rank"))}
        assert keys == {k for k in b if not is_timing_key(k) and not k.startswith(("memory/", "cost/rank"))}
        for key in keys:
            assert same(a[key], b[key]), (a["step"], a["agent"], key, a[key], b[key])
            n += 1
    return n


def final_weights(run: Path, name: str) -> dict[str, torch.Tensor]:
    return load_file(run / "checkpoints" / f"step_{STEPS:06d}" / "agents" / name / "model.safetensors")


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory) -> Path:
    """The reference: both agents unsharded, in this process."""
    run = tmp_path_factory.mktemp("unsharded") / "run"
    train(preflight(BASE), run)
    return run


@pytest.fixture(scope="module")
def private_ray():
    """One private Ray (3 CPUs, as executor.num_cpus=3 asks) that the in-process sharded runs of the tests after the
    two-node one join, as a run joins a running Ray: one Ray start instead of one per run."""
    import ray

    from hacrl_exp.ray_cluster import connect

    assert connect(None, num_cpus=3)
    yield
    ray.shutdown()


def test_an_agent_sharded_over_four_ranks_on_two_nodes_matches_the_unsharded_run(unsharded, tmp_path):
    """opt_char at W = 4 (FSDP2, gloo; its rollouts, grading, scoring and learning split over the four ranks) next to
    gpt2_bpe at W = 1 gives the same metrics, evaluations and weights as both unsharded (W = 2 is the kill-and-resume
    test's), on a two-node cluster (ray.cluster_utils.Cluster: a head without CPUs and nodes with custom resources
    node_a and node_b): opt_char's ranks 0 and 2 on node_a, 1 and 3 on node_b
    (placement=[node_a,node_b,node_a,node_b], a PACK placement group), gpt2_bpe on node_a; every rank reports, from
    inside its actor, its node. node_a's address is 127.0.0.2, node_b's 127.0.0.1, so the ranks report two addresses
    and meet at rank 0's, 127.0.0.2 (the path across nodes; gloo on lo, as both are loopback addresses of this
    machine); a non-loopback interface is tests/agents/test_rendezvous.py's."""
    import ray
    from ray.cluster_utils import Cluster

    from hacrl_exp.ray_cluster import _loopback_only

    assert not ray.is_initialized()  # else the run would join that Ray, not the cluster's (private_ray comes later)
    ranks = 4
    # every node and the driver on 127.0.0.1, like a private Ray: a driver that resolved this machine's address
    # would wait for a raylet there
    with _loopback_only():
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        node_a = cluster.add_node(num_cpus=3, resources={"node_a": 1}, node_ip_address="127.0.0.2")
        node_b = cluster.add_node(num_cpus=2, resources={"node_b": 1})
        try:
            cluster.wait_for_nodes()
            placed = [
                f"executor.address={cluster.address}",
                f"agents.members.opt_char.world_size={ranks}",
                "agents.members.opt_char.placement=[node_a,node_b,node_a,node_b]",
                "agents.members.gpt2_bpe.placement=node_a",
            ]
            summary = train(preflight([*BASE, *SHARDED, *placed]), tmp_path / "sharded")
        finally:
            cluster.shutdown()
    a, b = node_a.node_id, node_b.node_id
    assert summary["placement"] == {"opt_char": [a, b, a, b], "gpt2_bpe": [a]}
    rows = read_metrics(tmp_path / "sharded" / "metrics.jsonl")
    assert compared(read_metrics(unsharded / "metrics.jsonl"), rows) > 50
    assert any(r.get("train/updates") for r in rows if r["agent"] == "opt_char")
    # the ranks divide the work: each generated and graded a quarter of W = 1's rows, and ran forward and backward
    # about a quarter of its tokens (a row goes whole to one rank: 0.30, not 0.25)
    alone = [r for r in read_metrics(unsharded / "metrics.jsonl") if r["agent"] == "opt_char" and r["step"] == STEPS]
    split = [r for r in rows if r["agent"] == "opt_char" and r["step"] == STEPS]
    for rank in range(ranks):
        for cost in ("generated_rollouts", "graded_rollouts"):
            assert split[0][f"cost/rank{rank}/{cost}"] == alone[0][f"cost/{cost}"] / ranks
        for cost in ("forward_tokens", "backward_tokens"):
            assert split[0][f"cost/rank{rank}/{cost}"] <= 0.30 * alone[0][f"cost/{cost}"]
    for name in ("opt_char", "gpt2_bpe"):
        mine, reference = final_weights(tmp_path / "sharded", name), final_weights(unsharded, name)
        assert mine.keys() == reference.keys()
        for key in reference:
            torch.testing.assert_close(mine[key], reference[key], rtol=1e-5, atol=1e-7)
    # rank 0 holds its FSDP2 shard of every weight: the first ceil(rows / 4) rows of dim 0, in float32
    reference = final_weights(unsharded, "opt_char").values()
    shard = sum(math.ceil(t.shape[0] / ranks) * t[0].numel() * 4 for t in reference)
    opt_rows = [r for r in rows if r["agent"] == "opt_char" and "memory/params_mib" in r]
    assert opt_rows and opt_rows[-1]["memory/params_mib"] * 2**20 == shard
    step = tmp_path / "sharded" / "checkpoints" / f"step_{STEPS:06d}"
    assert sorted(p.name for p in (step / "optim" / "opt_char.dcp").iterdir()) == [
        ".metadata", *(f"__{r}_0.distcp" for r in range(ranks))
    ]  # fmt: skip
    config = (step / "agents" / "opt_char" / "config.json").read_text()
    assert '"OPTForCausalLM"' in config  # the model's class, not FSDP's wrapper


def test_a_sharded_run_killed_and_resumed_ends_with_the_uninterrupted_metrics(unsharded, private_ray, tmp_path):
    """SIGKILL (the crash point after checkpoint 2's files, DCP shards included, are written but not published),
    then resume: checkpoint 1 is taken, and the run ends with the unsharded uninterrupted run's metrics and
    weights. The killed run starts its own Ray (its process is the subject); the resume joins private_ray."""
    run = tmp_path / "run"
    overrides = [*BASE, *SHARDED, "trainer.checkpoint_every=1"]
    env = {**os.environ, CRASH_ENV: "checkpoint:2", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "hacrl_exp.run", *overrides, f"trainer.output_dir={run}",
               f"hydra.run.dir={tmp_path / 'hydra'}"]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_000001"
    assert (run / "checkpoints" / ".tmp_step_000002" / "optim" / "opt_char.dcp" / ".metadata").is_file()
    resumed = train(preflight([*overrides, f"trainer.resume={run}"]), tmp_path / "ignored")
    assert resumed["last_step"] == STEPS
    assert compared(read_metrics(unsharded / "metrics.jsonl"), read_metrics(run / "metrics.jsonl")) > 50
    for name in ("opt_char", "gpt2_bpe"):
        mine, reference = final_weights(run, name), final_weights(unsharded, name)
        for key in reference:
            torch.testing.assert_close(mine[key], reference[key], rtol=1e-5, atol=1e-7)


def test_the_rendezvous_is_loopback_only_and_a_failed_rank_stops_its_agent_at_once(private_ray):
    """Rank 0 hosts its group's store on 127.0.0.1 only (this machine's other address refuses the port). Kill rank 1
    (as kill -9 or the OOM killer would): the next call fails at once, rank 0 is killed with it rather than left
    waiting in a collective, the other agent still answers, and close does not wait for the dead group."""
    import ray

    from hacrl_exp.tasks import build_task
    from hacrl_exp.trainer.executor import RayExecutor

    config = preflight([*BASE, *SHARDED])
    executor = RayExecutor(config, learner_params(config))
    try:
        opt_ranks = executor.groups[0]
        port = ray.get(opt_ranks[0].store_port.remote())
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        address = ray.util.get_node_ip_address()
        if not address.startswith("127."):
            with pytest.raises(OSError):
                socket.create_connection((address, port), timeout=5).close()
        ray.kill(opt_ranks[1])
        started = time.monotonic()
        problems = build_task(config.task).train_problems(1, 2)
        with pytest.raises(ray.exceptions.RayActorError):
            executor.rollout(problems, 4, 1)
        assert time.monotonic() - started < 30
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(opt_ranks[0].ready.remote(), timeout=60)
        assert executor.call("ready", {1: ()}) == {1: "gpt2_bpe"}
    finally:
        started = time.monotonic()
        executor.close()
    assert time.monotonic() - started < 25  # the dead group's close is not awaited (30 s timeout)


def test_sharding_settings_need_ray_and_a_placement_that_exists():
    from hacrl_exp.errors import ConfigError
    from hacrl_exp.trainer.executor import _check_placements

    with pytest.raises(ConfigError, match=r"agents.members.opt_char.world_size=2 needs executor=ray"):
        preflight([*BASE, "agents.members.opt_char.world_size=2"])
    with pytest.raises(ConfigError, match=r"agents.members.opt_char.fsdp.offload=true needs executor=ray"):
        preflight([*BASE, "agents.members.opt_char.fsdp.offload=true"])
    with pytest.raises(ConfigError, match=r"agents.members.opt_char.placement='node_a' needs executor=ray"):
        preflight([*BASE, "agents.members.opt_char.placement=node_a"])
    config = preflight([*BASE, "executor=ray", "agents.members.opt_char.placement=node_a"])
    with pytest.raises(ConfigError, match=r"placement='node_a': no node of the Ray cluster has 'node_a'; start one"):
        _check_placements({"CPU": 2.0}, config.agents.members)


def test_an_agents_ranks_are_placed_on_one_node_or_one_per_listed_node():
    """placement: one resource for every rank (STRICT_PACK: one node) or one per rank; span_nodes=true: PACK."""
    from hacrl_exp.errors import ConfigError
    from hacrl_exp.trainer.executor import _check_placements, rank_placements, spans_nodes

    def opt_char(*overrides: str):
        return preflight([*BASE, *SHARDED, *overrides]).agents.members["opt_char"]

    one = opt_char("agents.members.opt_char.placement=node_a")
    assert (rank_placements(one), spans_nodes(one)) == (["node_a", "node_a"], False)
    listed = opt_char("agents.members.opt_char.placement=[node_a,node_b]")
    assert (rank_placements(listed), spans_nodes(listed)) == (["node_a", "node_b"], True)
    spread = opt_char("agents.members.opt_char.span_nodes=true")
    assert (rank_placements(spread), spans_nodes(spread)) == ([None, None], True)
    _check_placements({"CPU": 3.0, "node_a": 1.0, "node_b": 1.0}, {"opt_char": listed})
    with pytest.raises(ConfigError, match=r"placement=\['node_a', 'node_c'\]: no node of the Ray cluster has 'node_c'"):
        _check_placements({"node_a": 1.0}, {"opt_char": opt_char("agents.members.opt_char.placement=[node_a,node_c]")})
    with pytest.raises(ConfigError, match=r"placement=\['node_a'\] has 1 entries for world_size=2 ranks; give one"):
        opt_char("agents.members.opt_char.placement=[node_a]")
    with pytest.raises(ConfigError, match=r"placement=5 is not a Ray resource name nor a list of them"):
        opt_char("agents.members.opt_char.placement=5")
    with pytest.raises(ConfigError, match=r"gpt2_bpe.span_nodes=true is for the ranks of a sharded agent"):
        opt_char("agents.members.gpt2_bpe.span_nodes=true")
