"""MLflow logging of evaluation runs: one run per (checkpoint, agent), linked to its training run.

Layout of one evaluation run:
  tags      role=eval, agent, step, checkpoint (path), benchmarks, training_run_id (the training parent run, from
            state.json), training_agent_run_id (that agent's training run), mlflow.note.content
  params    settings, and per benchmark: prompt_template, prompt_format, version, extractor, grader, generation
  metrics   <benchmark>/<metric>, <benchmark>/<metric>_ci_low|_ci_high, counts; logged at the checkpoint's step
  artifacts results/samples.parquet, results/problems.parquet, results/summary.parquet (per-sample, per-problem,
            tidy summary; pandas.read_parquet reads them back, for paired tests between runs)
The run goes into the training run's experiment when that run is in the same store, else into `experiment`.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from hacrl_exp.evaluation.checkpoints import AgentCheckpoint
from hacrl_exp.evaluation.runner import EvalResult
from hacrl_exp.tracking import default_uri

ARTIFACT_DIR = "results"


def write_results(result: EvalResult, folder: Path, extra: dict[str, object] | None = None) -> list[Path]:
    """samples/problems/summary parquet files in `folder`, each with the `extra` columns (agent, step, ...)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in (("samples", result.samples), ("problems", result.problems), ("summary", result.summary)):
        frame = frame.assign(**(extra or {}))
        path = folder / f"{name}.parquet"
        frame.to_parquet(path, index=False)
        paths.append(path)
    return paths


def log_eval_run(
    result: EvalResult,
    ckpt: AgentCheckpoint,
    *,
    uri: str | None = None,
    experiment: str = "hacrl",
    run_name: str | None = None,
    params: dict[str, object] | None = None,
) -> str:
    """Create, fill and finish one MLflow evaluation run; returns its run id."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri or default_uri())
    experiment_id = _experiment(client, ckpt, experiment)
    tags = {
        "role": "eval",
        "agent": ckpt.agent,
        "checkpoint": str(ckpt.path),
        "benchmarks": ",".join(result.summary["benchmark"].unique()),
        "mlflow.note.content": f"Evaluation of {ckpt.label} ({ckpt.path})",
    }
    if ckpt.step is not None:
        tags["step"] = str(ckpt.step)
    if ckpt.run_ids.get(""):
        tags["training_run_id"] = ckpt.run_ids[""]
    if ckpt.run_ids.get(ckpt.agent):
        tags["training_agent_run_id"] = ckpt.run_ids[ckpt.agent]
    run = client.create_run(experiment_id, run_name=run_name or f"eval/{ckpt.label}", tags=tags)
    run_id = run.info.run_id
    try:
        merged = {**{k: str(v) for k, v in (params or {}).items()}, **result.params}
        items = [Param(k, v[:6000]) for k, v in merged.items()]
        for start in range(0, len(items), 100):
            client.log_batch(run_id, params=items[start : start + 100])
        now, step = int(time.time() * 1000), ckpt.step or 0
        metrics = [Metric(k, v, now, step) for k, v in result.metrics().items()]
        for start in range(0, len(metrics), 1000):
            client.log_batch(run_id, metrics=metrics[start : start + 1000])
        with tempfile.TemporaryDirectory() as tmp:
            write_results(result, Path(tmp), {"agent": ckpt.agent, "step": ckpt.step, "run_id": run_id})
            client.log_artifacts(run_id, tmp, ARTIFACT_DIR)
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id


def _experiment(client, ckpt: AgentCheckpoint, name: str) -> str:
    """The training parent run's experiment when that run is in this store, else experiment `name` (created)."""
    parent = ckpt.run_ids.get("")
    if parent:
        try:
            return client.get_run(parent).info.experiment_id
        except Exception:  # not in this store (another URI, deleted): fall back to the named experiment
            pass
    found = client.get_experiment_by_name(name)
    if found:
        return found.experiment_id
    from hacrl_exp.tracking_store import artifact_location

    return client.create_experiment(name, artifact_location=artifact_location(client.tracking_uri))
