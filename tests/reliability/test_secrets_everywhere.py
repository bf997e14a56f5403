"""Secrets are masked everywhere a config is written (docs/reliability.md, "Resume history and secrets (issue 40)").

One real tiny training run through `python -m hacrl_exp.run` (in-process) plants secrets two ways: overrides whose
keys look secret (`+extra.api_token=…`, a nested `+extra.notes.db_password=…`) and an environment variable read
through `${oc.env:…}` into the run name and a tag. Then every byte the run left is searched: the MLflow store (the
sqlite file and the artifact folder), the run folder, Hydra's folder, stdout and stderr.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import pytest

from hacrl_exp.agents.manifest import write_manifest
from hacrl_exp.trainer.runfolder import config_hash
from tests.cli import run_cli
from tests.e2e.tiny import tiny_overrides

TOKEN, PASSWORD, FROM_ENV = "PLANTED1-tok-9f3a", "PLANTED3-pw-77c1", "PLANTED2-env-51d0"
ENV = "HACRL_PLANTED_SECRET"
SECRETS = [
    f"+extra.api_token={TOKEN}",
    f"+extra.notes.db_password={PASSWORD}",
    f"tracking.run_name=r-${{oc.env:{ENV}}}",
    f"+tracking.tags.owner=${{oc.env:{ENV}}}",
]
OVERRIDES = [*tiny_overrides("pair", 1), "tracking.experiment=secrets", *SECRETS]


def train_cli(folder: Path, *extra: str):
    """The tiny run's command line in `folder` (its store folder/mlflow.db, artifacts under folder/mlruns), with the
    planted environment variable set."""
    hydra = folder / f"hydra-{len(list(folder.glob('hydra-*')))}"
    store = f"tracking.uri=sqlite:///{folder / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV, FROM_ENV)
        return run_cli("hacrl_exp.run", [*OVERRIDES, store, f"hydra.run.dir={hydra}", *extra], cwd=folder)


def leaks(folder: Path, *outputs: str) -> list[str]:
    """Where a planted value appears: files under `folder` (every byte, the sqlite store included) and outputs."""
    planted = [TOKEN, PASSWORD, FROM_ENV]
    found = [f"{p.relative_to(folder)}: {s}" for p in folder.rglob("*") if p.is_file() for s in planted
             if s.encode() in p.read_bytes()]  # fmt: skip
    return found + [f"output {i}: {s}" for i, text in enumerate(outputs) for s in planted if s in text]


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, object]:
    """The finished 1-step run with planted secrets: (its folder, the command's result)."""
    folder = tmp_path_factory.mktemp("secrets")
    result = train_cli(folder, f"trainer.output_dir={folder / 'run'}")
    assert result.returncode == 0, result.stderr
    return folder, result


def test_planted_secrets_appear_in_no_byte_the_run_wrote(planted):
    """Before: the token in the `overrides` and `command` tags, the run description and Hydra's config.yaml,
    overrides.yaml and hydra.yaml; the environment variable's value in the run name, the model names, config.json and
    state.json. Now: `***` in each."""
    folder, result = planted
    assert leaks(folder, result.stdout, result.stderr) == []
    assert (folder / "mlruns").is_dir() and (folder / "hydra-0" / ".hydra" / "overrides.yaml").is_file()
    client = mlflow.MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    parent = client.search_runs([client.get_experiment_by_name("secrets").experiment_id], "tags.role = 'parent'")[0]
    assert parent.info.run_name == "***" and parent.data.tags["owner"] == "***"
    assert (
        "+extra.api_token=***" in parent.data.tags["command"]
        and "+extra.api_token=***" in parent.data.tags["mlflow.note.content"]
    )
    config = json.loads((folder / "run" / "config.json").read_text())
    assert config["extra"] == {"api_token": "***", "notes": {"db_password": "***"}}
    assert config["rollout"]["max_new_tokens"] == 24  # not a secret: before, every key holding "token" was masked


def test_the_resume_takes_secrets_from_the_command_line_again(planted, tmp_path):
    """The checkpoint holds `***`, never the values: the same command (with the variable set) resumes and trains on,
    and still nothing is written in clear."""
    shutil.copytree(planted[0], tmp_path / "copy", ignore=shutil.ignore_patterns("hydra-*"))
    folder = tmp_path / "copy"
    state = json.loads((folder / "run" / "checkpoints" / "step_000001" / "state.json").read_text())
    assert state["config"]["extra"]["api_token"] == "***" and state["config"]["tracking"]["run_name"] == "***"
    result = train_cli(folder, f"trainer.resume={folder / 'run'}", "trainer.steps=2")
    assert result.returncode == 0, result.stderr
    assert (folder / "run" / "checkpoints" / "step_000002").is_dir()
    assert leaks(folder, result.stdout, result.stderr) == []


def test_a_changed_max_new_tokens_is_refused_on_resume(planted, tmp_path):
    """Before: `rollout.max_new_tokens` and each agent's `tokenizer` were masked as secrets ("token"), so a resume
    that changed them was taken silently, and they were missing from MLflow's params. Now one line names the key."""
    shutil.copytree(planted[0] / "run", tmp_path / "run")
    result = train_cli(tmp_path, f"trainer.resume={tmp_path / 'run'}", "rollout.max_new_tokens=20")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "rollout.max_new_tokens (24 → 20)" in result.stderr and not (tmp_path / "mlflow.db").exists()


def test_a_checkpoint_that_masked_tokenizer_keys_still_resumes(planted, tmp_path):
    """A checkpoint written before this change holds `***` for every key containing "token": it resumes (those keys
    are not comparable), with a warning."""
    shutil.copytree(planted[0] / "run", tmp_path / "run")
    step = tmp_path / "run" / "checkpoints" / "step_000001"
    state = json.loads((step / "state.json").read_text())
    state["config"]["rollout"]["max_new_tokens"] = "***"
    for agent in state["config"]["agents"]["members"].values():
        agent["tokenizer"] = "***"
    state["config_hash"] = config_hash(state["config"])
    (step / "state.json").write_text(json.dumps(state))
    write_manifest(step)
    result = train_cli(tmp_path, f"trainer.resume={tmp_path / 'run'}", "trainer.steps=2")
    assert result.returncode == 0, result.stderr
    assert "rollout.max_new_tokens" in result.stdout + result.stderr and "not compared" in result.stdout + result.stderr


def test_an_experiment_named_from_a_secret_is_refused_before_anything_is_written(tmp_path):
    """Found by the hostile pass: `tracking.experiment=exp_${oc.env:…}` put the secret in the store's experiment
    table (names are not masked there: two masked names would be one experiment, their runs mixed). Now refused."""
    result = train_cli(tmp_path, f"tracking.experiment=exp_${{oc.env:{ENV}}}", "trainer.output_dir=out")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("ConfigError: tracking.experiment=*** holds a secret value")
    assert FROM_ENV not in result.stderr + result.stdout and sorted(p.name for p in tmp_path.iterdir()) == []


def test_evaluate_refuses_an_experiment_named_from_a_secret(planted, tmp_path):
    """Found by the closing hostile pass: `python -m hacrl_exp.evaluate tracking.experiment=exp_${oc.env:…}` wrote
    the variable's value into the store's experiment table. Now refused as `run` refuses it, nothing written."""
    step = planted[0] / "run" / "checkpoints" / "step_000001"
    args = [f"checkpoints=[{step}]", "benchmarks=[arithmetic]", "limit=2", f"tracking.experiment=e_${{oc.env:{ENV}}}"]
    args.append(f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV, FROM_ENV)
        result = run_cli("hacrl_exp.evaluate", args, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("ConfigError: tracking.experiment=*** holds a secret value")
    assert FROM_ENV not in result.stderr and sorted(p.name for p in tmp_path.iterdir()) == []
