"""Results at a glance, read back through MLflow's API after a real two-job multirun (`-m trainer.steps=1,2`):
names unique per configuration, overrides recorded, generated descriptions, and final models that carry their final
metrics, logged once. The multirun runs in the test's process (tests/cli.py): two tiny jobs and four logged models."""

import json
from pathlib import Path

import pytest

from hacrl_exp.tracking.description import accuracy_text
from hacrl_exp.tracking.names import model_name
from tests.cli import run_cli
from tests.e2e.tiny import tiny_overrides


@pytest.fixture(scope="module")
def multirun(tmp_path_factory):
    """Two jobs that differ only in trainer.steps, in one store; (uri, {steps: summary})."""
    folder = tmp_path_factory.mktemp("glance")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    overrides = [o for o in tiny_overrides("pair", steps=1) if not o.startswith("trainer.steps=")]
    command = ["-m", "trainer.steps=1,2", *overrides, f"tracking.uri={uri}", f"hydra.sweep.dir={folder / 'sweep'}"]
    result = run_cli("hacrl_exp.run", command)
    assert result.returncode == 0, result.stderr[-3000:]
    summaries = [json.loads(p.read_text()) for p in sorted((folder / "sweep").glob("*/summary.json"))]
    return uri, {s["last_step"]: s for s in summaries}


def test_names_are_unique_per_configuration(multirun):
    from mlflow.tracking import MlflowClient

    uri, jobs = multirun
    client = MlflowClient(uri)
    parents = {steps: client.get_run(s["run_ids"][""]) for steps, s in jobs.items()}
    names = {steps: p.info.run_name for steps, p in parents.items()}
    assert len(set(names.values())) == 2 and all(n.startswith("hacpo-opt_char+gpt2_bpe-s0-") for n in names.values())
    for steps, parent in parents.items():
        tags = parent.data.tags
        assert f"trainer.steps={steps}" in tags["overrides"].split()
        assert tags["job"] == names[steps] and len(names[steps]) <= len("hacpo-opt_char+gpt2_bpe-s0-") + 64 + 7
        assert tags["config"].split("@")[0] == names[steps].replace("-s0", "")  # then the short commit, if any
        assert tags["setting"] == tags["config"].removeprefix("hacpo-")
        for agent in ("opt_char", "gpt2_bpe"):
            child = client.get_run(jobs[steps]["run_ids"][agent])
            assert child.info.run_name == f"{names[steps]}/{agent}"
            assert child.data.tags["overrides"] == tags["overrides"]


def test_descriptions_hold_overrides_accuracies_and_the_command(multirun):
    from mlflow.tracking import MlflowClient

    uri, jobs = multirun
    client = MlflowClient(uri)
    summary = jobs[2]
    parent = client.get_run(summary["run_ids"][""])
    text = parent.data.tags["mlflow.note.content"]
    assert f"Overrides: `{parent.data.tags['overrides']}`" in text
    assert parent.data.tags["command"].startswith("python -m hacrl_exp.run trainer.steps=2 ")
    assert f"Command: `{parent.data.tags['command']}`" in text
    results = []
    for agent in ("opt_char", "gpt2_bpe"):
        start, final = (summary["evals"][str(step)][agent]["accuracy/mean"] for step in (0, 2))
        results.append(f"{agent} {accuracy_text(start)} → {accuracy_text(final)}")
        child = client.get_run(summary["run_ids"][agent]).data
        own = f"{results[-1]} (hacpo, 2 steps, seed 0)"
        assert child.tags["mlflow.note.content"].splitlines()[0] == own
        assert parent.data.tags[f"gain/{agent}"] == f"{accuracy_text(start)} → {accuracy_text(final)}"
        rounded = round(final, 4)
        assert parent.data.metrics[f"final/accuracy_mean/{agent}"] == rounded == child.metrics["final/accuracy_mean"]
    assert text.splitlines()[0] == f"{', '.join(results)} (hacpo, 2 steps, seed 0)"  # the result first
    assert "Checkpoint: `" in text and "checkpoints/step_000002" in text


def last_step_metrics(client, run_id: str) -> tuple[int, dict[str, float]]:
    history = {k: client.get_metric_history(run_id, k) for k in client.get_run(run_id).data.metrics}
    last = max(m.step for points in history.values() for m in points)
    return last, {k: m.value for k, points in history.items() for m in points if m.step == last}


def test_models_carry_the_final_metrics_and_are_logged_once(multirun):
    import mlflow
    from mlflow.tracking import MlflowClient

    from hacrl_exp.tracking import open_job
    from hacrl_exp.trainer.validate import preflight

    uri, jobs = multirun
    client = MlflowClient(uri)
    mlflow.set_tracking_uri(uri)
    summary = jobs[2]
    job = client.get_run(summary["run_ids"][""]).info.run_name
    for agent in ("opt_char", "gpt2_bpe"):
        run_id = summary["run_ids"][agent]
        found = mlflow.search_logged_models(
            experiment_ids=[client.get_run(run_id).info.experiment_id],
            filter_string=f"source_run_id = '{run_id}'", output_format="list",
        )  # fmt: skip
        assert [m.name for m in found] == [model_name(job, agent)]
        step, metrics = last_step_metrics(client, run_id)
        linked = {m.key: (m.step, m.value) for m in found[0].metrics}
        assert step == 2 and linked == {k: (2, v) for k, v in metrics.items()}  # the Models page's values
        assert "final/accuracy_mean" in linked and "eval/accuracy/mean" in linked
        # the held-out metrics name the set they were measured on: the model page's "Datasets used"
        held_out = [i.dataset for i in client.get_run(run_id).inputs.dataset_inputs
                    if {t.key: t.value for t in i.tags}.get("mlflow.data.context") == "eval"]  # fmt: skip
        with_data = {m.key: (m.dataset_name, m.dataset_digest) for m in found[0].metrics if m.dataset_name}
        assert len(held_out) == 1 and with_data
        assert with_data == {k: (held_out[0].name, held_out[0].digest) for k in linked if k.startswith("eval/")}
        assert "model.md" in [f.path for f in client.list_artifacts(run_id)]  # shown under the run
        description = client.get_run(run_id).data.tags["mlflow.note.content"]
        assert found[0].tags["mlflow.note.content"] == description  # the model's page shows its run's description
    # a resumed finished job (its run ids from the checkpoint) logs no model again
    config = preflight([*tiny_overrides("pair", steps=2), f"tracking.uri={uri}"])
    tracker = open_job(config, {}, Path(summary["output_dir"]), summary["run_ids"])
    final = Path(summary["output_dir"]) / "checkpoints" / "step_000002"
    tracker.log_model(final / "agents" / "opt_char", "opt_char", step=2)
    tracker.close()
    run_id = summary["run_ids"]["opt_char"]
    experiment = client.get_run(run_id).info.experiment_id
    again = mlflow.search_logged_models(experiment_ids=[experiment], filter_string=f"source_run_id = '{run_id}'")
    assert len(again) == 1
