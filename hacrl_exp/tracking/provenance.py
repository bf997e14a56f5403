"""Provenance of a training job in MLflow: code version, entry point and user as MLflow's system tags, the task's
and benchmarks' data as MLflow datasets, and the trained agents as MLflow models (the transformers flavour).

Each function takes an `MlflowClient` and run ids, so it works without an active run (the trainer's tracker uses
the client API only). Everything here is best effort: provenance never stops a training run.
"""

from __future__ import annotations

import getpass
import hashlib
import importlib.metadata
import json
import logging
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from hacrl_exp.repo import REPO_ROOT

log = logging.getLogger(__name__)


def git_state(folder: Path = REPO_ROOT) -> tuple[str, bool] | None:
    """(HEAD commit, dirty) of the checkout holding `folder`; None outside git. Dirty: tracked files changed."""
    try:
        run = _git(folder)
        commit = run("rev-parse", "HEAD")
        if not commit:
            return None
        return commit, bool(run("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None


def _git(folder: Path):
    def run(*args: str) -> str:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=folder)
        return out.stdout.strip() if out.returncode == 0 else ""

    return run


def source_tags(entry_point: str | None = None) -> dict[str, str]:
    """MLflow's system tags for a training run: mlflow.source.{name,type,git.commit}, mlflow.user, and git_dirty."""
    tags = {"mlflow.source.name": entry_point or _entry_point(), "mlflow.source.type": "LOCAL"}
    try:
        tags["mlflow.user"] = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        pass
    state = git_state()
    if state is not None:
        tags["mlflow.source.git.commit"], tags["git_dirty"] = state[0], str(state[1]).lower()
    return tags


def _entry_point() -> str:
    """'hacrl_exp.run' for `python -m hacrl_exp.run` (argv[0] is the module's file), else argv[0]'s file name."""
    path = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("hacrl_exp/run.py")
    try:
        return ".".join(path.resolve().relative_to(REPO_ROOT).with_suffix("").parts)
    except ValueError:
        return path.name


def problems_dataset(name: str, problems: Sequence, source: str):
    """An MLflow dataset (name, digest of the rows, source path) of a list of problems (id, category, prompt,
    answer)."""
    import mlflow.data
    import pandas as pd

    rows = [
        {"id": p.id, "category": p.category, "prompt": p.prompt, "answer": str(getattr(p, "answer", ""))}
        for p in problems
    ]
    frame = pd.DataFrame(rows, columns=["id", "category", "prompt", "answer"])
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]
    with warnings.catch_warnings():  # a plain path or label matches two local source kinds; either is right
        warnings.simplefilter("ignore", UserWarning)
        return mlflow.data.from_pandas(frame, source=source, name=name, digest=digest)


def log_datasets(client, run_ids: Sequence[str], datasets: Sequence[tuple[object, str]]) -> None:
    """Log (dataset, context) pairs as the inputs of each run (MLflow's Datasets column and run page)."""
    from mlflow.entities import DatasetInput, InputTag

    inputs = [
        DatasetInput(dataset._to_mlflow_entity(), tags=[InputTag("mlflow.data.context", context)])
        for dataset, context in datasets
    ]
    for run_id in run_ids:
        client.log_inputs(run_id, datasets=inputs)


def logged_model_names(client, run_id: str) -> set[str]:
    """Names of the complete (READY) models a run has logged: one a killed process left PENDING is logged again."""
    outputs = client.get_run(run_id).outputs
    models = [client.get_logged_model(o.model_id) for o in (outputs.model_outputs if outputs else [])]
    return {m.name for m in models if str(m.status).endswith("READY")}


def log_agent_model(
    client,
    run_id: str,
    folder: Path,
    name: str,
    registered_name: str | None = None,
    step: int = 0,
    artifact_path: str = "model",
) -> str:
    """Log a `save_pretrained` folder (model + tokenizer) as an MLflow transformers model named `name` of `run_id`
    at `step`; returns the model URI. The run's metrics of that step are linked to the model (its Models page shows
    them; `link_step_metrics`, the held-out ones with their dataset), and the run gets `<artifact_path>.md`, a note
    on the model: MLflow 3's UI lists a logged model's files on the model's page, and in the run's Artifacts tab only
    when the run has no artifacts of its own. Loads back with `mlflow.transformers.load_model(uri)` as a
    text-generation pipeline. The model gets its run's description (result first: hacrl_exp.tracking.description),
    which MLflow's model page shows.

    pip requirements are given explicitly: the flavour's inference imports torchvision for any torch model, which
    this project does not install."""
    import mlflow
    import mlflow.transformers
    from mlflow.entities import LoggedModelOutput

    requirements = [f"{p}=={importlib.metadata.version(p)}" for p in ("torch", "transformers")]
    active = mlflow.active_run()
    if active is not None:  # log_model would link the model and its metrics to that run
        raise RuntimeError(f"an MLflow run ({active.info.run_id}) is active; cannot log a model to {run_id}")
    mlflow.set_tracking_uri(client.tracking_uri)
    run = client.get_run(run_id)
    model = client.create_logged_model(run.info.experiment_id, name=name, source_run_id=run_id)
    # no active run: MLflow links nothing itself; the run's output and the step's metrics are linked below
    info = mlflow.transformers.log_model(
        transformers_model=str(folder),
        name=name,
        task="text-generation",
        pip_requirements=requirements,
        registered_model_name=registered_name,
        model_id=model.model_id,
    )
    client.log_outputs(run_id, models=[LoggedModelOutput(model.model_id, step=step)])
    link_step_metrics(client, model.model_id, run, step)
    description = run.data.tags.get("mlflow.note.content")
    if description:  # the model's page shows its own description, not its run's
        client.set_logged_model_tags(info.model_id, {"mlflow.note.content": description})
    client.log_text(run_id, model_note(info, name, step, folder), f"{artifact_path}.md")
    return info.model_uri


def link_step_metrics(client, model_id: str, run, step: int) -> int:
    """Link the metrics of `step` of `run` (an mlflow Run, as `client.get_run` gives it) to the logged model
    `model_id`, as MLflow's log_model does for a model logged in a run, and the `eval/*` ones with the held-out set
    they were measured on (the run's input of context "eval", `log_datasets`), so the model's page lists it under
    "Datasets used" (a run's own metrics carry no dataset). Returns how many points were linked."""
    from mlflow.entities import Metric

    run_id = run.info.run_id
    held_out = [
        d.dataset
        for d in (run.inputs.dataset_inputs if run.inputs else [])
        if any(t.key == "mlflow.data.context" and t.value == "eval" for t in d.tags)
    ]
    points = []
    for key in run.data.metrics:
        dataset = held_out[0] if held_out and key.startswith("eval/") else None
        points += [
            Metric(m.key, m.value, m.timestamp, m.step, model_id=model_id, run_id=run_id,
                   dataset_name=dataset and dataset.name, dataset_digest=dataset and dataset.digest)
            for m in client.get_metric_history(run_id, key) if m.step == step and m.model_id is None
        ]  # fmt: skip
    if points:
        client.log_batch(run_id, metrics=points)
    return len(points)


def model_note(info, name: str, step: int, folder: Path) -> str:
    """The run artifact that points at a logged model: its name, id and step, how to load it, where its files are."""
    model = info.model_id
    return (
        f"# Model `{name}`\n\nMLflow logged model `{model}`, logged at step {step}: it carries this run's metrics of "
        f"step {step} (the experiment's Models tab lists it with them).\n\n"
        f'Load it: `mlflow.transformers.load_model("models:/{model}")` (a text-generation pipeline).\n\n'
        f"Its files: `{info.artifact_path}` (the model's page, Artifacts tab); copied from the checkpoint folder "
        f"`{folder}` (save_pretrained format).\n"
    )
