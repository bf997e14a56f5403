"""MLflow → tidy pandas frames for the report.

A training job is a parent run (role=parent; params = the resolved config) with one child run per agent
(role=agent). The report works on agent runs; a run's *method* is its algorithm plus the HACPO mechanisms
switched off, e.g. "GSPO×2", "HACPO", "HACPO −ω". Frames (one row per …):
    runs      agent run: run_id, parent_id, agent, seed, method, algorithm, experiment_id, …
    curves    (run_id, step, metric): eval/accuracy/*, reward/mean, rollouts_total, tokens_total, seconds
              (seconds = the parent's cumulative time/step_s: training time, evaluations excluded), and the mechanism
              metrics when a run logged them: cross/omega, train/p_hat, cross/in_window_share. The logged keys of
              docs/metrics.md are read (train/reward_mean → reward/mean, train/rollouts_total → rollouts_total, …);
              runs logged before them are read through their old keys (`curve_name`).
    problems  (run_id, benchmark, problem_id): per-problem scores of the final evaluation: the trainer's greedy
              held-out answers (benchmark 'heldout', artifact eval/step_N/<agent>.jsonl) and, for runs scored with
              `python -m hacrl_exp.evaluate` (role=eval runs tagged training_agent_run_id), each benchmark's
              headline metric from that run's results/problems.parquet (the latest evaluated step)
    benchmarks (run_id, benchmark, step, value): those evaluation runs' logged `<benchmark>/<headline>` metrics
    totals    (run_id, name, value): each agent run's last logged cost totals (TOTALS: generated rollouts and tokens,
              trained rows, updates, forward/backward tokens, process seconds; the parent's process seconds as
              'job process s') and its warm-start metrics; a total no run logged is absent
Runs also carry their jobs' tags data_seed and heldout_seed (NaN when not logged) and the grading policy (param
task.grader_forms; absent: 'requested', the policy before the setting existed).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hacrl_exp.errors import ConfigError
from hacrl_exp.report.paper import UPDATE_MATCHED
from hacrl_exp.tracking.store import check_database_url, default_uri, parse_store_uri

ALGORITHM_LABELS = {"gspo": "GSPO", "gspo_x2": "GSPO×2", "naive": "Naive", "hacpo": "HACPO", "grpo": "GRPO",
                    "hacpo_shuffled_partner": "HACPO (partner rewards shuffled)",
                    "gspo_dynamic": "GSPO (dynamic sampling)"}  # fmt: skip
MECHANISM_LABELS = {
    "capability_advantage": "Adv",
    "omega": "ω",
    "exponential_is": "ExpIS",
    "stepwise": "Stepwise",
    "clip": "Clip",
}
"""Short names of HACPO's mechanisms in method labels ("HACPO −Adv" is the paper's "HACPO − Adv")."""
TAGGED_METHODS = {"gspo_update_matched": UPDATE_MATCHED}
"""Methods told apart by the job's `method` tag rather than by the algorithm's params."""
TOTALS = {
    "generated rollouts": ("cost/generated_rollouts", "train/rollouts_total", "rollouts_total"),
    "generated tokens": ("cost/generated_tokens", "train/tokens_total", "tokens_total"),
    "trained rows": ("cost/trained_rows",),
    "updates": ("cost/updates",),
    "forward tokens": ("cost/forward_tokens",),
    "backward tokens": ("cost/backward_tokens",),
    "process s": ("cost/process_seconds",),
    "warm start accuracy": ("warm_start/validation_accuracy", "warm_start/heldout_accuracy"),
    "warm start steps": ("warm_start/steps_run",),
}
"""The totals frame's names → the agent-run metric keys read for them, first one logged wins (the older keys of
generated rollouts and tokens are the same counts, docs/metrics.md). Cumulative: the last logged value is the total."""
JOB_PROCESS_SECONDS = "job process s"
CURVE_METRICS = ("reward/mean", "rollouts_total", "tokens_total")
"""The report's names of the training curves it reads besides eval/accuracy/* (see `curve_name`)."""
MECHANISM_METRICS = ("cross/omega", "train/p_hat", "cross/in_window_share")
"""The mechanism metrics the report plots, as logged since docs/metrics.md (one key per quantity in every agent's
run; ω and the in-window share are already means over the learner's sources)."""
DIAGNOSTIC_METRICS = (*MECHANISM_METRICS, "cross/baseline_weight", "cross/weight_mean", "cross/ratio_mean",
                      "cross/rows_run")  # fmt: skip
"""The metrics of the report's diagnostics table (docs/metrics.md): the plotted ones, the baseline weight 1/ρ, the
cross rows' mean effective weight and ratio, and how many cross rows were run."""
CURVE_KEYS = {
    "train/reward_mean": "reward/mean",
    "train/rollouts_total": "rollouts_total",
    "train/tokens_total": "tokens_total",
    **{key: key for key in DIAGNOSTIC_METRICS},
    # keys of runs logged before docs/metrics.md
    "reward/mean": "reward/mean",
    "rollouts_total": "rollouts_total",
    "tokens_total": "tokens_total",
    "capability/p_hat": "train/p_hat",
    "cost/process_seconds": "process_seconds",
}
STEP_SECONDS = ("time/step_s", "time/step")
"""The parent's step time: the docs/metrics.md key, then the old one."""


def store_uri(config) -> str:
    """The store's URI, parsed as `python -m hacrl_exp.run` parses tracking.uri (`tracking.store.parse_store_uri`:
    a `?` or `#` that would make MLflow open another store is refused), naming the setting it came from."""
    if config.uri:
        source = f"uri={config.uri}"
    elif os.environ.get("MLFLOW_TRACKING_URI"):
        source = f"MLFLOW_TRACKING_URI={os.environ['MLFLOW_TRACKING_URI']}"
    else:
        source = f"the default store {default_uri()} (uri unset)"
    return parse_store_uri(config.uri or default_uri(), source).uri


def check_studies_storage(config) -> None:
    """The α studies' Optuna storage (studies.storage), read with sqlalchemy: a sqlite URL parsed as strictly as the
    store's (a `?` would open another database)."""
    if config.studies.storage:
        check_database_url(config.studies.storage, f"studies.storage={config.studies.storage}")


def curve_name(key: str) -> str | None:
    """The report's curve name of a logged metric key, or None when the report does not read it. Old per-source
    keys map to the mean over sources: omega/<source> → cross/omega, cross/<source>/in_window →
    cross/in_window_share."""
    if key.startswith("eval/accuracy/"):
        return key
    if key in CURVE_KEYS:
        return CURVE_KEYS[key]
    parts = key.split("/")
    if len(parts) == 2 and parts[0] == "omega":
        return "cross/omega"
    if len(parts) == 3 and parts[0] == "cross" and parts[2] == "in_window":
        return "cross/in_window_share"
    return None


BENCHMARK_COLUMNS = ["run_id", "benchmark", "step", "value"]
HELDOUT = "heldout"
"""Benchmark name of the trainer's own held-out evaluation in the problems frame."""


def method_label(params: dict[str, str], extra: list[str] = (), tag: str | None = None) -> str:
    """'HACPO −ω −Clip' from algorithm.name and the mechanisms.* params set to False, or TAGGED_METHODS[tag] for a
    method the job's `method` tag names (the update-matched GSPO); extra params appended."""
    algorithm = params.get("algorithm.name", "?")
    label = TAGGED_METHODS.get(tag) or ALGORITHM_LABELS.get(algorithm, algorithm)
    if algorithm == "hacpo" and tag not in TAGGED_METHODS:  # other algorithms never read the mechanism switches
        off = [short for key, short in MECHANISM_LABELS.items() if params.get(f"mechanisms.{key}") == "False"]
        label += "".join(f" −{short}" for short in off)
    for key in extra:
        label += f" {key.rsplit('.', 1)[-1]}={params.get(key, '?')}"
    return label


def method_label_of_tag(tag: str) -> str:
    """The report's label of a job's `method` tag (hacrl_exp.tracking.names.method_name): 'hacpo-no_omega-no_clip'
    → 'HACPO −ω −Clip', 'gspo_update_matched' → 'GSPO (update-matched)', 'gspo_x2' → 'GSPO×2'."""
    algorithm, *off = tag.split("-no_")
    label = TAGGED_METHODS.get(algorithm) or ALGORITHM_LABELS.get(algorithm, algorithm)
    return label + "".join(f" −{MECHANISM_LABELS.get(m, m)}" for m in off)


@dataclass
class ReportData:
    """Everything the tables and plots read."""

    runs: pd.DataFrame
    curves: pd.DataFrame
    problems: pd.DataFrame
    benchmarks: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=BENCHMARK_COLUMNS))
    skipped: list[str] = field(default_factory=list)
    """Runs left out, each with the reason (unfinished, sweep trial, no evaluation)."""
    totals: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["run_id", "name", "value"]))
    uri: str | None = None
    """The MLflow store the runs were read from (links to them)."""
    _final: tuple = field(default=(None, None), repr=False, compare=False)

    def final_problems(self) -> pd.DataFrame:
        """The problems frame's rows of each run's last evaluation (the loader adds step-0 rows for the base); kept
        while `problems` is the same frame, as every table and comparison reads it."""
        if self._final[0] is not self.problems:
            p = self.problems
            self._final = (p, p[p["step"] == p.groupby("run_id")["step"].transform("max")])
        return self._final[1]


def mlflow_filter(tags: dict[str, str], extra: str | None) -> str:
    """An MLflow filter string: every tag equal to its value, and `extra` (a raw filter) if given."""
    parts = [f"tags.`{key}` = '{value}'" for key, value in sorted(tags.items())]
    return " and ".join(parts + ([extra] if extra else []))  # MLflow joins clauses with and only: no parentheses


def experiment_ids(client, names: list[str]) -> list[str]:
    """MLflow experiment ids by name; an unknown name is a ConfigError listing the known ones."""
    ids = []
    for name in names:
        found = client.get_experiment_by_name(name)
        if found is None:
            known = sorted(e.name for e in client.search_experiments())
            raise ConfigError(f"experiments: no MLflow experiment named {name!r} in this store; known: {known}")
        ids.append(found.experiment_id)
    return ids


def search_runs(client, ids: list[str], tags: dict[str, str], extra_filter: str | None):
    """(agent runs, their parent runs) matching the filter, as mlflow.search_runs frames."""
    import mlflow
    from mlflow.exceptions import MlflowException

    mlflow.set_tracking_uri(client.tracking_uri)
    base = mlflow_filter(tags, extra_filter)
    found = {}
    for role in ("agent", "parent"):
        try:
            found[role] = mlflow.search_runs(ids, " and ".join(filter(None, [f"tags.role = '{role}'", base])))
        except MlflowException as exc:  # a filter MLflow cannot parse (e.g. IN over params): the user's to fix
            if not extra_filter:
                raise
            reason = " ".join(str(exc).split())[:200]
            raise ConfigError(
                f"filter={extra_filter!r}: MLflow cannot search with it ({reason}); write clauses joined by 'and', "
                "e.g. \"params.seed != '9' and params.`trainer.steps` = '80'\""
            ) from None
    agents, parents = found["agent"], found["parent"].set_index("run_id", drop=False)
    if agents.empty or parents.empty:
        return pd.DataFrame(), parents
    agents = agents.rename(columns={"tags.mlflow.parentRunId": "parent_id"})
    return agents[agents["parent_id"].isin(parents.index)], parents


def load(
    client,
    experiments: list[str],
    tags: dict[str, str],
    extra_filter: str | None = None,
    label_params: list[str] = (),
    include_unfinished: bool = False,
    include_trials: bool = False,
) -> ReportData:
    """Read the selected runs, their curves and their final per-problem answers from one MLflow store."""
    ids = experiment_ids(client, experiments)
    agents, parents = search_runs(client, ids, tags, extra_filter)
    if agents.empty:
        raise ConfigError(
            f"no training runs in experiments {experiments} match tags {tags}"
            + (f" and filter {extra_filter!r}" if extra_filter else "")
            + "; check the experiment name and tag filters (python -m hacrl_exp.report experiments=[...] tags.grid=...)"
        )
    rows, skipped = [], []
    for _, run in agents.iterrows():
        parent = parents.loc[run["parent_id"]]
        name = f"{parent['tags.mlflow.runName']}/{run['tags.agent']}"
        study = parent.get("tags.study")
        if not include_trials and isinstance(study, str) and study:
            skipped.append(f"{name}: a sweep trial (study {study}); include_trials=true keeps it")
            continue
        if not include_unfinished and parent["status"] != "FINISHED":
            skipped.append(f"{name}: job status {parent['status']}")
            continue
        rows.append(run_row(run, parent, label_params))
    runs = pd.DataFrame(rows)
    if runs.empty:
        raise ConfigError("every matching run was left out: " + "; ".join(skipped[:5]))
    refuse_repeated_jobs(runs)
    problems = load_problems(client, runs)
    missing = set(runs["run_id"]) - set(problems["run_id"])
    for run_id in sorted(missing):
        skipped.append(f"{run_id[:8]}: no per-problem evaluation artifact (eval/step_N/<agent>.jsonl)")
    runs = runs[~runs["run_id"].isin(missing)].sort_values(["method", "agent", "seed"]).reset_index(drop=True)
    benchmarks, scored = load_benchmarks(client, ids, runs)
    problems = qualify_problem_ids(runs, pd.concat([problems, scored], ignore_index=True))
    totals = load_totals(runs, agents, parents)
    return ReportData(runs, load_curves(client, runs), problems, benchmarks, skipped, totals, client.tracking_uri)


def _reads_forms(params: dict[str, str]) -> bool:
    """Whether a job's grader reads answer forms: the math task with the one grader (hacrl_exp.rewards)."""
    return params.get("task.name") == "math" and params.get("task.reward", "math_verify") == "math_verify"


def run_row(run: pd.Series, parent: pd.Series, label_params: list[str] = ()) -> dict:
    """One agent run of the runs frame, from its mlflow.search_runs row and its parent's (params, tags)."""
    params = {k[len("params.") :]: v for k, v in parent.items() if k.startswith("params.") and isinstance(v, str)}

    def tag(key: str):
        value = parent.get(f"tags.{key}")
        value = run.get(f"tags.{key}") if value is None or pd.isna(value) else value
        return None if value is None or pd.isna(value) else str(value)

    agent, forms = run["tags.agent"], params.get("task.grader_forms")
    return {
        "run_id": run["run_id"],
        "parent_id": run["parent_id"],
        "run_name": parent["tags.mlflow.runName"],
        "experiment_id": run["experiment_id"],
        "agent": agent,
        "seed": int(parent["tags.seed"]),
        "algorithm": params.get("algorithm.name"),
        "task": params.get("task.name", "?"),
        "tiers": params.get("task.tiers"),
        "method": method_label(params, list(label_params), tag("method")),
        "steps": int(params.get("trainer.steps", 0)),
        "data_seed": tag("data_seed"),
        "heldout_seed": tag("heldout_seed"),
        # a run that reads no answer form logs no policy (arithmetic: exact digits; task.reward=verl: verl's rule)
        "grader_forms": forms or ("requested" if _reads_forms(params) else "none"),
        "grader_forms_logged": forms is not None or not _reads_forms(params),
        "warm_start_target": params.get(f"agents.members.{agent}.warm_start.target_accuracy"),
        "commit": str(parent.get("tags.mlflow.source.git.commit") or "unknown")[:9],
        "dirty": parent.get("tags.git_dirty") == "true",
        "job_start": parent.get("start_time"),
        "job_end": parent.get("end_time"),
    }


def load_totals(runs: pd.DataFrame, agents: pd.DataFrame, parents: pd.DataFrame) -> pd.DataFrame:
    """(run_id, name, value): the TOTALS each agent run logged (last value: mlflow.search_runs' metrics.* columns)
    and its job's process seconds; a name no key of which was logged for a run is left out for it."""
    latest, job_key = agents.set_index("run_id"), "metrics.cost/process_seconds"
    rows = []
    for run in runs.itertuples():
        for name, keys in TOTALS.items():
            values = [latest.at[run.run_id, f"metrics.{k}"] for k in keys if f"metrics.{k}" in latest.columns]
            value = next((v for v in values if pd.notna(v)), None)
            if value is not None:
                rows.append((run.run_id, name, float(value)))
        job = parents.at[run.parent_id, job_key] if job_key in parents else None
        if job is not None and pd.notna(job):
            rows.append((run.run_id, JOB_PROCESS_SECONDS, float(job)))
    return pd.DataFrame(rows, columns=["run_id", "name", "value"])


def qualify_problem_ids(runs: pd.DataFrame, problems: pd.DataFrame) -> pd.DataFrame:
    """When the held-out seed varies across the jobs, one problem id names different problems at different seeds:
    prefix it with the held-out seed ('<heldout_seed>:<id>'), so per-problem pairs and clusters join only the same
    problem. Unchanged when the seed is the same everywhere or not recorded."""
    seeds = runs["heldout_seed"].dropna().unique() if "heldout_seed" in runs else []
    if len(seeds) < 2 or problems.empty:
        return problems
    prefix = problems["run_id"].map(runs.set_index("run_id")["heldout_seed"]).fillna("?")
    return problems.assign(problem_id=prefix + ":" + problems["problem_id"].astype(str))


def refuse_repeated_jobs(runs: pd.DataFrame) -> None:
    """A (method, agent, seed) held by two finished jobs would count as two seeds of one method, or be averaged
    into one: either way the across-seed tests would be wrong. Refuse, naming the jobs, instead of choosing one."""
    jobs = runs.groupby(["method", "agent", "seed"])["parent_id"].agg(sorted)
    repeated = jobs[jobs.map(len) > 1]
    if repeated.empty:
        return
    (method, agent, seed), parents = repeated.index[0], repeated.iloc[0]
    raise ConfigError(
        f"{len(repeated)} (method, agent, seed) appear in more than one finished job, e.g. {method} seed {seed} "
        f"({agent}) in jobs {', '.join(parents)}; delete the extra jobs (mlflow runs delete --run-id ID) or "
        "narrow the selection with tags.<key>=... or filter=..."
    )


def load_curves(client, runs: pd.DataFrame) -> pd.DataFrame:
    """(run_id, step, metric, value) of the curves the report reads (`curve_name`, new or old keys), plus
    'seconds'; several old per-source keys of one step are averaged."""
    rows = []
    for run in runs.itertuples():
        for key in client.get_run(run.run_id).data.metrics:
            name = curve_name(key)
            if name is not None:
                rows += [(run.run_id, m.step, name, m.value) for m in client.get_metric_history(run.run_id, key)]
    seconds = []
    for parent_id in runs["parent_id"].unique():
        logged = client.get_run(parent_id).data.metrics
        key = next((k for k in STEP_SECONDS if k in logged), STEP_SECONDS[0])
        history = sorted((m.step, m.value) for m in client.get_metric_history(parent_id, key))
        total = 0.0
        seconds.append((parent_id, 0, 0.0))
        for step, value in history:
            total += value
            seconds.append((parent_id, step, total))
    frame = pd.DataFrame(rows, columns=["run_id", "step", "metric", "value"])
    by_parent = pd.DataFrame(seconds, columns=["parent_id", "step", "value"])
    timed = runs[["run_id", "parent_id"]].merge(by_parent, on="parent_id").drop(columns="parent_id")
    frame = pd.concat([frame, timed.assign(metric="seconds")], ignore_index=True)
    frame = frame.groupby(["run_id", "step", "metric"], as_index=False)["value"].mean()  # old per-source keys
    return frame.sort_values(["run_id", "metric", "step"]).reset_index(drop=True)


def eval_steps(client, run_id: str) -> list[int]:
    """The steps with an eval/step_N artifact folder, ascending."""
    return sorted(int(Path(a.path).name.split("_")[-1]) for a in client.list_artifacts(run_id, "eval") if a.is_dir)


def load_problems(client, runs: pd.DataFrame) -> pd.DataFrame:
    """(run_id, benchmark, step, problem_id, category, score) from each run's final eval/step_N/<agent>.jsonl
    artifact, plus the step-0 answers of one run per (agent, seed): every method starts there from the same warm
    start, so one run's step 0 is the base of all of them (the report's `base (step 0)` row)."""
    frames = []
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per small file is noise
    based: set[tuple[str, int]] = set()
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs.itertuples():
            logged = eval_steps(client, run.run_id)
            if not logged:
                continue
            steps = [max(logged)]
            if (run.agent, run.seed) not in based and 0 in logged[:-1]:
                based.add((run.agent, run.seed))
                steps.append(0)
            for at in steps:
                path = client.download_artifacts(run.run_id, f"eval/step_{at:06d}/{run.agent}.jsonl", tmp)
                records = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
                frame = pd.DataFrame(records).rename(columns={"id": "problem_id", "reward": "score"})
                frames.append(frame[["problem_id", "category", "score"]].assign(run_id=run.run_id, step=at))
    columns = ["run_id", "benchmark", "step", "problem_id", "category", "score"]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True).assign(benchmark=HELDOUT)[columns]


def load_benchmarks(client, ids: list[str], runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(benchmarks, problems) of the latest evaluation run per (agent run, benchmark); see the module docstring."""
    import mlflow

    from hacrl_exp.evaluation.spec import load_benchmark

    evals = mlflow.search_runs(ids, filter_string="tags.role = 'eval' and attributes.status = 'FINISHED'")
    empty = pd.DataFrame(columns=BENCHMARK_COLUMNS), pd.DataFrame()
    if evals.empty or "tags.training_agent_run_id" not in evals:
        return empty
    evals = evals[evals["tags.training_agent_run_id"].isin(runs["run_id"])]
    evals = evals.assign(step=pd.to_numeric(evals.get("tags.step"), errors="coerce").fillna(-1))
    rows, frames = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for (run_id, names), part in evals.groupby(["tags.training_agent_run_id", "tags.benchmarks"]):
            latest = part.sort_values(["step", "start_time"]).iloc[-1]
            path = client.download_artifacts(latest["run_id"], "results/problems.parquet", tmp)
            table = pd.read_parquet(path)
            for name in str(names).split(","):
                headline = load_benchmark(name).headline
                value = latest.get(f"metrics.{name}/{headline}")
                if value is None or pd.isna(value):
                    continue
                rows.append((run_id, name, int(latest["step"]), float(value)))
                mine = table[table["benchmark"] == name]
                frames.append(
                    pd.DataFrame(
                        {
                            "run_id": run_id,
                            "benchmark": name,
                            "step": int(latest["step"]),
                            "problem_id": mine["problem_id"].astype(str),
                            "category": mine["category"].astype(str),
                            "score": mine[headline].astype(float),
                        }
                    )  # fmt: skip
                )
    benchmarks = pd.DataFrame(rows, columns=BENCHMARK_COLUMNS)
    return benchmarks, pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
