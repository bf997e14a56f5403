"""Tasks: problems with verifiable answers. `build_task` maps `task.name` to its class."""

from __future__ import annotations

from hacrl_exp.config.schema import TaskConfig
from hacrl_exp.tasks.base import Grade, Problem, Task

__all__ = ["Grade", "Problem", "Task", "build_task"]


def build_task(cfg: TaskConfig) -> Task:
    """The task named by cfg.name, built from its config fields."""
    if cfg.name == "arithmetic":
        from hacrl_exp.tasks.arithmetic import ArithmeticTask

        return ArithmeticTask(cfg.tiers, cfg.scratchpad, cfg.eval_per_tier, cfg.seed)
    if cfg.name == "math":
        from hacrl_exp.tasks.math import build_math_task

        return build_math_task(cfg)
    raise ValueError(f"task.name={cfg.name!r} is unknown; choose arithmetic or math")
