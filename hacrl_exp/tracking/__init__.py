"""MLflow tracking: a training job's runs (`open_job`), the store (`store`), run names, tags and params (`names`),
provenance (`provenance`: git, datasets, logged models) and evaluation runs (`evaluation_runs`). docs/tracking.md.

    tracker      MlflowTracker: a parent run per job and a child run per agent; buffered metrics, store outages
    job          open_job: the one call the trainer makes to open its runs
    store        the store's URI and a probe before anything is written
    names        run names, tags and the params that apply: pure functions of the resolved config and overrides
    description  the generated run descriptions (overrides, start → final accuracy, checkpoint, command)
    views        saved views of MLflow's UI (final accuracy, compare configurations) and links that land on them
    provenance   git state, source tags, datasets and the agents' logged models
    evaluation_runs  one MLflow run per evaluated (checkpoint, agent)
"""

from hacrl_exp.tracking.evaluation_runs import log_evaluation_run
from hacrl_exp.tracking.job import open_job
from hacrl_exp.tracking.store import check_store, default_uri
from hacrl_exp.tracking.tracker import close_running_runs, create_stores, flatten, redact_secrets, ui_hint

__all__ = [
    "check_store",
    "close_running_runs",
    "create_stores",
    "default_uri",
    "flatten",
    "log_evaluation_run",
    "open_job",
    "redact_secrets",
    "ui_hint",
]
