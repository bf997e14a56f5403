"""One call that opens a training job's MLflow runs: named, tagged, with its params, provenance, config and data.

`open_job` is what the trainer calls (trainer/loop.py); everything it decides is a pure function of the resolved
config in `hacrl_exp.tracking.names` (docs/tracking.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hacrl_exp.config.schema import Config
from hacrl_exp.tracking.names import applicable_params, hydra_grid, hydra_overrides, run_name, run_tags
from hacrl_exp.tracking.provenance import problems_dataset, source_tags
from hacrl_exp.tracking.tracker import MlflowTracker, NullTracker

JobData = tuple[str, Sequence[Any], str, str]
"""A dataset the job reads: (name, problems, source, context), context one of eval | train | benchmark."""


def open_job(
    config: Config,
    params: dict[str, Any],
    output_dir: Path,
    run_ids: dict[str, str] | None = None,
    datasets: Callable[[], Sequence[JobData]] | None = None,
) -> MlflowTracker | NullTracker:
    """The job's tracker, its runs ready to log to.

    A new job (run_ids None): a parent run named `run_name(config, overrides)` (overrides: this Hydra job's) and
    one child run per agent, `<name>/<agent>`, every run tagged with `run_tags(config, grid, overrides)`, the output
    folder and MLflow's source tags (git commit, entry point, user) and described (`MlflowTracker.describe`: the
    overrides first; accuracies come at the end of the job); the params that apply (`applicable_params`), the full
    resolved config `params` as the parent's `config.json`, and each of `datasets()` as an MLflow dataset input of
    every run (called only when tracking is on: loading benchmark problems only to name them would be wasted).
    A resumed job (run_ids from its checkpoint) continues those runs and logs none of this again.
    tracking.backend=none gives a NullTracker with the same interface.
    """
    if config.tracking.backend == "none":
        return NullTracker()
    overrides, config_dirs = hydra_overrides()
    tags = {**run_tags(config, hydra_grid(), overrides, config_dirs), "output_dir": str(output_dir)}
    agents = list(config.agents.members)
    name = run_name(config, overrides)
    tracker = MlflowTracker(config.tracking, applicable_params(params), agents, tags, run_ids, name, source_tags())
    if run_ids is None:
        tracker.describe(config.trainer.steps, {})
        tracker.log_config(params)
        if datasets is not None:
            tracker.log_datasets(
                [(problems_dataset(name, rows, source), ctx) for name, rows, source, ctx in datasets()]
            )
    return tracker
