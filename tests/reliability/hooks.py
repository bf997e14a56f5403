"""A hook into the training loop for fault injection and measurements, without touching the loop."""

from __future__ import annotations

from collections.abc import Callable

import hacrl_exp.trainer.loop as loop


def on_step_start(monkeypatch, callback: Callable[[int], None]) -> None:
    """Call callback(step) at the start of every training step (when the loop asks its task for the prompts)."""
    build_task = loop.build_task

    def tracked_task(cfg):
        task = build_task(cfg)
        problems = task.train_problems

        def train_problems(step, n):
            callback(step)
            return problems(step, n)

        task.train_problems = train_problems
        return task

    monkeypatch.setattr(loop, "build_task", tracked_task)
