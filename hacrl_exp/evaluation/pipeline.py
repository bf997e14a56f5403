"""The evaluate command's job: every (checkpoint, agent) on every benchmark, results to parquet and MLflow.

Order matters for bad input: checkpoints are resolved and every benchmark's data is read and validated before torch
loads a model, so a wrong path or a malformed row fails in a second with one line.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd

from hacrl_exp.config.evaluate_schema import EvaluateConfig
from hacrl_exp.evaluation.checkpoints import resolve_checkpoints
from hacrl_exp.evaluation.data import load_problems
from hacrl_exp.evaluation.markdown import markdown_table
from hacrl_exp.evaluation.spec import load_benchmark
from hacrl_exp.rewards import FORMS


def git_sha() -> str:
    """The repository's HEAD commit, or 'unknown'."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).resolve().parent
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_evaluation(config: EvaluateConfig, output_dir: Path) -> pd.DataFrame:
    """Evaluate, write <output_dir>/<agent@step>/*.parquet and summary.parquet, log MLflow runs; returns the tidy
    summary (agent, step, checkpoint, run_id, seed, git_sha, grader_forms, benchmark, metric, value, ci_low, ci_high,
    n)."""
    ckpts = resolve_checkpoints(config.checkpoints, config.agents)
    specs = [load_benchmark(name) for name in config.benchmarks]
    problems = {s.name: load_problems(s, config.data_dir, config.limit, config.source) for s in specs}

    import torch  # heavy imports only once the inputs are known to be good

    from hacrl_exp.evaluation.checkpoints import load_checkpoint_agent
    from hacrl_exp.evaluation.results import log_eval_run, write_results
    from hacrl_exp.evaluation.runner import EvalSettings, evaluate_agent
    from hacrl_exp.rewards import Grader

    if config.threads:
        torch.set_num_threads(config.threads)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if config.device == "auto" else config.device
    settings = EvalSettings.from_config(config)
    sha = git_sha()
    params = {
        "seed": config.seed,
        "limit": config.limit,
        "data_dir": config.data_dir,
        "source": config.source,
        "bootstrap": config.bootstrap,
        "grader.timeout_s": config.grader.timeout_s,
        "git_sha": sha,
    }
    tables = []
    with Grader(config.grader.timeout_s, config.grader.workers) as grader:
        for ckpt in ckpts:
            agent = load_checkpoint_agent(
                ckpt, device, config.max_batch_size, config.max_prompt_tokens, config.chat_template, config.dtype
            )
            result = evaluate_agent(agent, specs, settings, grader=grader, problems=problems)
            run_id = None
            if config.tracking.backend == "mlflow":
                run_id = log_eval_run(
                    result,
                    ckpt,
                    uri=config.tracking.uri,
                    experiment=config.tracking.experiment,
                    params={**params, "checkpoint": ckpt.path},
                )
            extra = {
                "agent": ckpt.agent,
                "step": ckpt.step,
                "checkpoint": str(ckpt.path),
                "run_id": run_id,
                "seed": config.seed,
                "git_sha": sha,
                "grader_forms": config.grader.forms,
            }
            write_results(result, output_dir / ckpt.label.replace("@", "_step"), extra)
            tables.append(result.summary.assign(**extra))
            del agent
    summary = pd.concat(tables, ignore_index=True)
    summary.to_parquet(output_dir / "summary.parquet", index=False)
    return summary


def headline_table(summary: pd.DataFrame) -> str:
    """One line per (agent, step, benchmark): headline metric with its 95% CI under the grading policy (the column
    header names it), the headline under the other policy (n/a under a rule that reads no form), problems, no-answer
    rate, timeouts.

    A headline that needs more samples than were drawn (aime2025's best@30 with samples=1) was skipped: the first
    metric that was computed stands in, named as such."""
    from hacrl_exp.evaluation.runner import COUNTS

    forms = summary["grader_forms"].iat[0] if "grader_forms" in summary else FORMS[0]
    other = next(f for f in FORMS if f != forms)
    rows = []
    for (agent, step, bench), part in summary.groupby(["agent", "step", "benchmark"], sort=False, dropna=False):
        spec = load_benchmark(bench)
        values = part.set_index("metric")
        metric = spec.headline
        if metric not in values.index:
            metric = next(m for m in values.index if m not in COUNTS and "_forms_" not in m)
            metric = f"{metric} ({spec.headline} skipped: {int(values.loc['samples_per_problem'].value)} sample(s))"
        name = metric.split(" ")[0]
        head, beside = values.loc[name], f"{name}_forms_{other}"
        rows.append(
            [
                agent,
                step,
                bench,
                metric,
                _with_ci(head),
                _with_ci(values.loc[beside]) if beside in values.index else "n/a",
                int(values.loc["problems"].value),
                f"{values.loc['no_answer_rate'].value:.2f}",
                int(values.loc["timeouts"].value),
            ]
        )
    headers = ["agent", "step", "benchmark", "metric", f"forms={forms} [95% CI]", f"forms={other} [95% CI]"]
    return markdown_table([*headers, "problems", "no answer", "timeouts"], rows)


def _with_ci(row) -> str:
    return f"{row.value:.3f} [{row.ci_low:.3f}, {row.ci_high:.3f}]"
