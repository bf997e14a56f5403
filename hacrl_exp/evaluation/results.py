"""An evaluation's results: parquet files for paired tests, and its MLflow run (hacrl_exp.tracking.evaluation_runs).

Layout of one evaluation run (one per checkpoint and agent):
  tags      role=eval, agent, step, checkpoint (path), benchmarks, training_run_id (the training parent run, from
            state.json), training_agent_run_id (that agent's training run), mlflow.note.content
  params    settings (grader.forms: the grading policy the metrics follow), and per benchmark: prompt_template,
            prompt_format, version, extractor, grader, generation
  metrics   <benchmark>/<metric>, <benchmark>/<metric>_ci_low|_ci_high, counts; under the `math` rule also the
            headline under the other grading policy, <benchmark>/<headline>_forms_<other>; logged at the
            checkpoint's step
  artifacts results/samples.parquet, results/problems.parquet, results/summary.parquet (per-sample, per-problem,
            tidy summary; pandas.read_parquet reads them back, for paired tests between runs; samples hold the reward
            under each policy, reward_forms_requested and reward_forms_value)
"""

from __future__ import annotations

from pathlib import Path

from hacrl_exp.evaluation.checkpoints import AgentCheckpoint
from hacrl_exp.evaluation.runner import EvalResult
from hacrl_exp.tracking import log_evaluation_run


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
    """Create, fill and finish one MLflow evaluation run of `ckpt`; returns its run id."""
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

    def write_artifacts(folder: Path, run_id: str) -> None:
        forms = result.params.get("grader.forms")
        write_results(result, folder, {"agent": ckpt.agent, "step": ckpt.step, "run_id": run_id, "grader_forms": forms})

    return log_evaluation_run(
        uri=uri,
        experiment=experiment,
        run_name=run_name or f"eval/{ckpt.label}",
        tags=tags,
        params={**{k: str(v) for k, v in (params or {}).items()}, **result.params},
        metrics=result.metrics(),
        step=ckpt.step or 0,
        write_artifacts=write_artifacts,
        training_run_id=ckpt.run_ids.get(""),
    )
