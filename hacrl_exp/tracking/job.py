"""One call that opens a training job's MLflow runs: named, tagged, with its params, provenance, config and data.

`open_job` is what the trainer calls (trainer/loop.py); everything it decides is a pure function of the resolved
config in `hacrl_exp.tracking.names` (docs/tracking.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hacrl_exp.config.schema import Config
from hacrl_exp.errors import OutputError
from hacrl_exp.paths import free_bytes
from hacrl_exp.tracking.masking import mask_override
from hacrl_exp.tracking.names import (
    applicable_params,
    hydra_grid,
    hydra_overrides,
    rerun_name,
    run_name,
    run_tags,
)
from hacrl_exp.tracking.provenance import problems_dataset, source_tags
from hacrl_exp.tracking.store import store_location
from hacrl_exp.tracking.tracker import MlflowTracker, NullTracker, close_running_runs

log = logging.getLogger(__name__)

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
    A resumed job (run_ids from its checkpoint) continues those runs and logs none of this again; in a store that does
    not hold them (a new or moved store) they are created again, as for a new job, and the trainer replays the run's
    history from metrics.jsonl. A store that fails while the runs are opened is one OutputError line, and the runs
    made so far are FAILED; RUNNING runs of this run folder that a dead process left behind are marked FAILED.
    tracking.backend=none gives a NullTracker with the same interface.
    """
    if config.tracking.backend == "none":
        return NullTracker()
    from mlflow.exceptions import MlflowException

    overrides, config_dirs = hydra_overrides()
    overrides = None if overrides is None else [mask_override(o) for o in overrides]  # tags, name, command: no secret
    agents, source = list(config.agents.members), source_tags()
    name = run_name(config, overrides)
    try:
        if run_ids is None:  # a rerun of a name the experiment holds gets -r2, -r3 (a resume keeps its runs)
            name = rerun_name(name, job_names(config, name))
        commit = source.get("mlflow.source.git.commit")
        tags = {**run_tags(config, hydra_grid(), overrides, config_dirs, name, commit), "output_dir": str(output_dir)}
        tracker = MlflowTracker(config.tracking, applicable_params(params), agents, tags, run_ids, name, source)
    except (OSError, MlflowException) as exc:  # e.g. the store filled up: one line, the runs made so far FAILED
        raise store_error(exc, config, output_dir) from None
    except Exception:
        fail_left_runs(config, output_dir)
        raise
    # runs of this folder that a dead process left RUNNING (killed, or failed while creating them): FAILED now
    fail_left_runs(config, output_dir, keep=set(tracker.run_ids.values()))
    if run_ids is None or tracker.recreated:
        tracker.describe(config.trainer.steps, {})
        tracker.log_config(params)
        if datasets is not None:
            tracker.log_datasets(
                [(problems_dataset(name, rows, source), ctx) for name, rows, source, ctx in datasets()]
            )
    return tracker


def job_names(config: Config, name: str) -> set[str]:
    """The names of the experiment's training jobs (role=parent runs) that start with `name`: those a new job's name
    must not repeat (`rerun_name`)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store_location(config.tracking).uri)
    experiment = client.get_experiment_by_name(config.tracking.experiment)
    if experiment is None:
        return set()
    prefix = name.split("'")[0]  # LIKE's own wildcards (% and _) only widen the search; the names are then matched
    found = client.search_runs(
        [experiment.experiment_id], f"tags.role = 'parent' and attributes.run_name LIKE '{prefix}%'", max_results=50_000
    )
    return {run.info.run_name for run in found if run.info.run_name.startswith(name)}


def fail_left_runs(config: Config, output_dir: Path, keep: set[str] = frozenset(), warn: bool = True) -> bool:
    """Mark FAILED the RUNNING runs of this run folder but `keep` (the folder's lock means no live process owns them);
    best effort, as the store may be what failed. True when it got through."""
    try:
        uri = store_location(config.tracking).uri
        tags = {"output_dir": str(output_dir)}
        close_running_runs(uri, config.tracking.experiment, tags, status="FAILED", keep=keep)
        return True
    except Exception as exc:  # noqa: BLE001 - the error that brought us here is the one to report
        if warn:
            cause = " ".join(str(exc).split())[:200]
            log.warning("runs of %s left RUNNING: the store did not take their status (%s)", output_dir, cause)
        return False


def store_error(exc: BaseException, config: Config, output_dir: Path) -> OutputError:
    """The one line for a store that failed while the job's runs were opened: a full disk with the store's path and
    free bytes, else the store and MLflow's first words; and whether the runs made so far are marked FAILED."""
    location = store_location(config.tracking)
    cause = " ".join(str(exc).split())[:200]
    closed = fail_left_runs(config, output_dir, warn=False)  # the line below says it
    runs = "the runs made so far are FAILED" if closed else "runs made so far stay RUNNING until the next run here"
    if location.path is not None and ("full" in cause or free_bytes(location.path) < 1 << 20):
        head = f"disk full: MLflow store {location.path} has {free_bytes(location.path)} bytes free"
    else:
        head = f"MLflow store {location.uri} failed"
    return OutputError(
        f"{head} while the job's runs were opened ({type(exc).__name__}: {cause}); {runs}; fix it, rerun"
    )
