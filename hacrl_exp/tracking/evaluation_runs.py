"""MLflow runs of `python -m hacrl_exp.evaluate`: one run per (checkpoint, agent), linked to its training run.

The evaluation app (hacrl_exp.evaluation.results) decides what goes in a run; this module only writes it. The run goes
into the training parent run's experiment when that run is in the same store, else into `experiment`.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from hacrl_exp.tracking.masking import MASK, is_secret, mask_tags, mask_text
from hacrl_exp.tracking.store import default_uri, experiment_id_and_tags, prepare_mlflow

ARTIFACT_DIR = "results"
"""The artifact folder of an evaluation run's per-sample, per-problem and summary parquet files."""


def log_evaluation_run(
    *,
    uri: str | None,
    experiment: str,
    run_name: str,
    tags: dict[str, str],
    params: dict[str, str],
    metrics: dict[str, float],
    step: int,
    write_artifacts: Callable[[Path, str], object],
    training_run_id: str | None = None,
) -> str:
    """Create, fill and finish one evaluation run; returns its run id.

    write_artifacts(folder, run_id) writes the files to upload as ARTIFACT_DIR/. A failure marks the run FAILED."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    prepare_mlflow()
    client = MlflowClient(uri or default_uri())
    experiment_id = _experiment(client, training_run_id, experiment)
    run_name, tags = mask_text(run_name), mask_tags(tags)  # what the store shows holds no secret (tracking.masking)
    run_id = client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
    try:
        items = [Param(k, MASK if is_secret(k) else mask_text(v)[:6000]) for k, v in params.items()]
        for start in range(0, len(items), 100):
            client.log_batch(run_id, params=items[start : start + 100])
        now = int(time.time() * 1000)
        values = [Metric(k, v, now, step) for k, v in metrics.items()]
        for start in range(0, len(values), 1000):
            client.log_batch(run_id, metrics=values[start : start + 1000])
        with tempfile.TemporaryDirectory() as tmp:
            write_artifacts(Path(tmp), run_id)
            client.log_artifacts(run_id, tmp, ARTIFACT_DIR)
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id


def _experiment(client, training_run_id: str | None, name: str) -> str:
    """The training run's experiment when that run is in this store, else experiment `name` (created)."""
    if training_run_id:
        try:
            return client.get_run(training_run_id).info.experiment_id
        except Exception:  # not in this store (another URI, deleted): fall back to the named experiment
            pass
    return experiment_id_and_tags(client, name)[0]
