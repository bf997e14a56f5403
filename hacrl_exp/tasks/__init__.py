"""Tasks: problems with verifiable answers. `build_task` maps `task.name` to its class."""

from __future__ import annotations

from hacrl_exp.config.schema import TaskConfig
from hacrl_exp.tasks.base import Grade, Problem, Task

__all__ = ["Grade", "Problem", "Task", "build_task"]


def build_task(cfg: TaskConfig) -> Task:
    """The task named by cfg.name, built from its config fields. task.seed and task.heldout_seed are the values
    `hacrl_exp.config.validate.resolve_task_seeds` filled in; an unresolved seed (a TaskConfig built by hand) is 0."""
    if cfg.name == "arithmetic":
        from hacrl_exp.tasks.arithmetic import ArithmeticTask

        return ArithmeticTask(cfg.tiers, cfg.scratchpad, cfg.eval_per_tier, cfg.seed or 0, cfg.heldout_seed)
    if cfg.name == "math":
        return _math_task(cfg)
    raise ValueError(f"task.name={cfg.name!r} is unknown; choose arithmetic or math")


def _math_task(cfg: TaskConfig) -> Task:
    """MATH from task.data_dir / $HACRL_DATA_DIR JSONL files when present, else from the HF dataset."""
    from hacrl_exp.errors import ConfigError
    from hacrl_exp.tasks.math import MathTask
    from hacrl_exp.tasks.problem_data import resolve_data_path

    def local(name: str, key: str):
        try:
            return resolve_data_path(name, cfg.data_dir, key="task.data_dir")
        except FileNotFoundError as exc:
            if cfg.data_dir is not None:  # the user pointed at a folder: a missing file there is an error
                raise ConfigError(f"task.{key}={name!r}: {exc}") from None
            return None

    train, evaluation = local(cfg.train_file, "train_file"), local(cfg.eval_file, "eval_file")
    if train is None and not cfg.hf_train:
        raise ConfigError(
            f"task.train_file={cfg.train_file!r} was not found and task.hf_train is empty; "
            "set task.data_dir or HACRL_DATA_DIR to the JSONL folder"
        )
    extra = {"train_dataset": cfg.hf_train} if cfg.hf_train else {}
    return MathTask(
        train,
        evaluation,
        seed=cfg.seed or 0,
        eval_limit=cfg.eval_limit,
        bad_rows=cfg.bad_rows,
        data_dir=cfg.data_dir,
        grader_timeout_s=cfg.grader_timeout_s,
        grader_workers=cfg.grader_workers,
        reward=cfg.reward,
        grader_forms=cfg.grader_forms,
        **extra,
    )
