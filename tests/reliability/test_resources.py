"""Resources over a long run: memory stays flat and the checkpoint folder holds only trainer.keep_checkpoints
checkpoints, whatever the number written. CI-sized (120 tiny steps); `python -m benchmarks.memory` measures RSS
over 500 steps (docs/reliability.md has both)."""

from __future__ import annotations

import statistics
from pathlib import Path

import psutil

import hacrl_exp.trainer.loop as loop
import hacrl_exp.trainer.runstate as runstate
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides
from tests.reliability.hooks import on_step_start

STEPS, EVERY, KEEP = 120, 10, 2
GROWTH_LIMIT_MB = 8.0


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def long_run(monkeypatch, folder: Path, steps: int, every: int, keep: int, *extra: str):
    """Train the tiny pair; returns RSS (MiB) at the start of each step and, after each checkpoint, the
    (step, names in the checkpoints folder, its bytes)."""
    me, rss, checkpoints = psutil.Process(), {}, []
    save_checkpoint = runstate.save_checkpoint  # RunState.save writes every checkpoint through it

    def record_rss(step: int) -> None:
        rss[step] = me.memory_info().rss / 2**20

    def tracked_save(root, step, *args, **kwargs):
        final = save_checkpoint(root, step, *args, **kwargs)
        checkpoints.append((step, sorted(p.name for p in root.iterdir()), folder_bytes(root)))
        return final

    on_step_start(monkeypatch, record_rss)
    monkeypatch.setattr(runstate, "save_checkpoint", tracked_save)
    overrides = [f"trainer.checkpoint_every={every}", f"trainer.keep_checkpoints={keep}", "trainer.eval_every=0"]
    loop.train(preflight([*tiny_overrides("pair", steps), *overrides, *extra]), folder)
    return rss, checkpoints


def test_long_run_keeps_memory_flat_and_rotates_checkpoints(tmp_path, monkeypatch):
    rss, checkpoints = long_run(monkeypatch, tmp_path, STEPS, EVERY, KEEP)
    early = statistics.median(rss[s] for s in range(31, 51))  # steps 1-30: allocator and caches warm up
    late = statistics.median(rss[s] for s in range(STEPS - 19, STEPS + 1))
    assert late - early < GROWTH_LIMIT_MB, f"RSS grew {late - early:.1f} MiB from steps 31-50 to the last 20"

    assert [step for step, _, _ in checkpoints] == list(range(EVERY, STEPS + 1, EVERY))
    for step, names, _ in checkpoints:
        kept = [f"step_{s:06d}" for s in range(max(EVERY, step - (KEEP - 1) * EVERY), step + 1, EVERY)]
        assert names == ["latest", *kept], (step, names)  # older ones rotated, no temporary folder left
    sizes = [size for _, _, size in checkpoints[KEEP - 1 :]]
    assert max(sizes) - min(sizes) < 0.01 * min(sizes)  # disk use bounded by keep_checkpoints, not by the run
