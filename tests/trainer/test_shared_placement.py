"""executor.placement=shared on CPU: the agents take turns (wake, call, sleep, recorded in schedule.jsonl) and the
run is the local executor's, metric for metric and weight for weight (tests/trainer/test_ray.py holds Ray's disjoint
placement to the local executor, so no third run is needed here).

One run each (Ray's start is most of a run's ~50 s on 2 cores), shared by the module's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import read_metrics
from hacrl_exp.trainer.schedule import FILE, read_schedule, schedule_problems
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides

pytest.importorskip("ray", reason="ray is not installed (pip install 'hacrl_exp[ray]')")

AGENTS = ("opt_char", "gpt2_bpe")
STEPS = 3
RUNS = {
    "local": [],
    "shared": ["executor=ray", "executor.placement=shared"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The tiny pair for 3 steps: in process, and as Ray actors sharing their devices."""
    root = tmp_path_factory.mktemp("placements")
    overrides = [*tiny_overrides("pair", steps=STEPS), "tracking.backend=none", "trainer.eval_every=1"]
    for name, extra in RUNS.items():
        train(preflight([*overrides, *extra]), root / name)
    return {name: root / name for name in RUNS}


def compared_keys(row: dict) -> list[str]:
    """All but the measured ones: time/* and *_s / *_seconds (wall and CPU clocks), memory/* (each process's own)."""
    return [k for k in row if not k.startswith(("time/", "memory/")) and not k.endswith(("_s", "_seconds"))]


def test_shared_and_local_runs_are_bit_identical(runs):
    """The same work in the same order per agent: each worker draws from its own stream, so whether the agents take
    turns or run side by side changes nothing but the clocks; bit for bit, metrics and final weights."""
    rows = {name: read_metrics(path / "metrics.jsonl") for name, path in runs.items()}
    assert len(rows["local"]) == len(rows["shared"]) > 0
    compared = 0
    for local, shared in zip(rows["local"], rows["shared"]):
        assert local.keys() == shared.keys()
        for key in compared_keys(local):
            assert local[key] == shared[key] or local[key] != local[key], (local["step"], key)
            compared += 1
    assert compared > 100
    final = Path("checkpoints") / f"step_{STEPS:06d}" / "agents"
    for agent in AGENTS:
        weights = {name: (path / final / agent / "model.safetensors").read_bytes() for name, path in runs.items()}
        assert weights["local"] == weights["shared"], agent
    assert not (runs["local"] / FILE).exists()  # no turns, no schedule


def test_every_shared_call_is_between_its_agents_wake_and_sleep(runs):
    rows = read_schedule(runs["shared"] / FILE)
    assert schedule_problems(rows) == []
    assert [(r["agent"], r["event"]) for r in rows[:4]] == [(a, e) for a in AGENTS for e in ("build", "sleep")]
    for step in range(1, STEPS + 1):  # each step: every agent's rollout in turn, then every agent's learn
        calls = [(r["call"], r["agent"]) for r in rows if r["step"] == step and r["event"] == "call"]
        assert calls[:4] == [("rollout", a) for a in AGENTS] + [("learn", a) for a in AGENTS], calls
    assert rows[-1]["event"] == "sleep"


def test_the_schedule_rule_catches_two_agents_awake():
    """schedule_problems itself: a wake while another agent is awake, and a call not followed by its sleep."""
    row = lambda agent, event, call="rollout": {"step": 1, "agent": agent, "event": event, "call": call}  # noqa: E731
    good = [
        row("a", "wake"),
        row("a", "call"),
        row("a", "sleep"),
        row("b", "wake"),
        row("b", "call"),
        row("b", "sleep"),
    ]
    assert schedule_problems(good) == []
    overlap = [row("a", "wake"), row("b", "wake"), row("a", "call"), row("a", "sleep")]
    assert any("while a is awake" in p for p in schedule_problems(overlap))
    unslept = [row("a", "wake"), row("a", "call"), row("b", "wake")]
    assert any("not followed by its sleep" in p for p in schedule_problems(unslept))
    sleepless = [row("a", "call")]
    assert any("without its wake" in p for p in schedule_problems(sleepless))
