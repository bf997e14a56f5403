"""A run folder belongs to one run, and a resume is exact or refused (docs/reliability.md, "Run integrity").

One finished tiny run (a checkpoint every step) is made once; each test works on a copy of it, so a refusal can be
checked byte for byte: a refused run changes nothing, an allowed resume continues exactly.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from hacrl_exp.agents.manifest import write_manifest
from hacrl_exp.config.preflight import compose_config
from hacrl_exp.crash_drill import deterministic, mlflow_histories
from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.checkpoints import resolve_checkpoints
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import read_metrics
from hacrl_exp.trainer.runfolder import check_run_folder
from hacrl_exp.trainer.validate import preflight, validate
from tests.e2e.tiny import tiny_overrides

STEPS = 3
OVERRIDES = [*tiny_overrides("pair", STEPS), "trainer.checkpoint_every=1", "tracking.experiment=integrity"]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under a folder and its bytes: what 'nothing was changed' is checked against."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, str, dict]:
    """A finished 3-step run in its own store: (run folder, store URI, summary)."""
    folder = tmp_path_factory.mktemp("finished")
    store = f"sqlite:///{folder / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HACRL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "warm_start_cache"))
        summary = train(preflight([*OVERRIDES, f"tracking.uri={store}"]), folder / "run")
    shutil.copy(folder / "mlflow.db", folder / "pristine.db")  # the store before any test resumed into it
    return folder / "run", store, summary


@pytest.fixture
def copy(finished, tmp_path) -> Path:
    """A copy of the finished run (same MLflow runs, recorded store) that a test may resume or damage."""
    return Path(shutil.copytree(finished[0], tmp_path / "run"))


def resume(run: Path | str, *extra: str):
    return preflight([*OVERRIDES, f"trainer.resume={run}", *extra])


def test_a_new_run_refuses_a_folder_that_holds_a_run(copy):
    before = snapshot(copy)
    with pytest.raises(ConfigError, match=rf"trainer.output_dir={copy} already holds a run .*trainer.resume={copy}"):
        train(preflight(OVERRIDES), copy)
    assert snapshot(copy) == before  # metrics.jsonl not appended to, checkpoints not replaced


def test_a_changed_config_is_refused_naming_the_keys(copy):
    before = snapshot(copy)
    changed = resume(copy, "algorithm.alpha=3.0", "agents.members.opt_char.model.hidden_size=48")
    with pytest.raises(ConfigError) as info:
        train(changed, copy.parent / "ignored")
    message = str(info.value)
    assert "agents.members.opt_char.model.hidden_size (32 → 48)" in message and "algorithm.alpha (1.0 → 3.0)" in message
    assert snapshot(copy) == before and not (copy.parent / "ignored").exists()


def test_allowed_changes_resume_and_the_summary_covers_the_whole_run(copy, finished):
    _, store, first = finished
    summary = train(resume(copy, "trainer.steps=4", "trainer.eval_every=2", "tracking.flush_every=3"), copy)
    assert summary["last_step"] == 4 and summary["output_dir"] == str(copy)
    assert list(summary["evals"]) == [0, 3, 4]  # the first run's evaluations are kept
    assert {s: summary["evals"][s] for s in (0, 3)} == first["evals"]
    rows = read_metrics(copy / "metrics.jsonl")
    keys = [(r["step"], r["agent"], k) for r in rows for k in r if k not in ("step", "agent")]
    assert len(keys) == len(set(keys)), "a metric was logged twice"
    runs = mlflow_histories(store, "integrity")  # the recorded store: tracking.uri was not given on resume
    assert {r["status"] for r in runs.values()} == {"FINISHED"} and {r["run_id"] for r in runs.values()} == set(
        first["run_ids"].values()
    )
    assert [s for s, _ in runs["opt_char"]["metrics"]["train/reward_mean"]] == [1, 2, 3, 4]


def test_a_kill_before_the_summary_is_repaired_by_resuming(copy, finished):
    (copy / "summary.json").unlink()  # killed between the final checkpoint and the summary
    summary = train(resume(copy), copy)
    written = json.loads((copy / "summary.json").read_text())
    assert summary["evals"] == finished[2]["evals"] and written["evals"] == json.loads(json.dumps(summary["evals"]))


def test_a_step_folder_resumes_its_own_run_or_is_refused(copy, tmp_path):
    stray = Path(shutil.copytree(copy / "checkpoints" / "step_000002", tmp_path / "copied" / "step_000002"))
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match="is a checkpoint outside its run folder"):
        train(resume(stray), tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match=rf"trainer.output_dir={tmp_path / 'other'} is not the run folder"):
        train(resume(copy, f"trainer.output_dir={tmp_path / 'other'}"), tmp_path / "other")
    assert snapshot(tmp_path) == before
    summary = train(resume(copy / "checkpoints" / "step_000002"), tmp_path / "elsewhere")  # rewinds its own run
    assert summary["output_dir"] == str(copy) and summary["steps_run"] == 1 and not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("manifest", ["kept", "regenerated", "deleted"])
@pytest.mark.parametrize("damaged", ["agents/opt_char/model.safetensors", "state.json", "optim/gpt2_bpe.pt"])
def test_a_damaged_checkpoint_falls_back_to_the_newest_intact_one(copy, damaged, manifest, caplog):
    """Whatever the manifest says (kept, written again after the damage, or deleted), the files are checked by
    content: safetensors headers against the file's size, torch files as complete zip archives, JSON parsed."""
    step = copy / "checkpoints" / "step_000003"
    path = step / damaged
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # truncated, as by a full disk
    if manifest == "regenerated":
        write_manifest(step)
    elif manifest == "deleted":
        (step / "manifest.json").unlink()
    with caplog.at_level(logging.WARNING, logger="hacrl_exp.trainer.runfolder"):
        folder = check_run_folder(resume(copy), None)
    assert folder.checkpoint == copy / "checkpoints" / "step_000002"
    assert f"damaged checkpoint, not used: {path} is " in caplog.text
    with pytest.raises(ConfigError, match=f"holds no intact checkpoint .damaged: {path} is "):
        check_run_folder(resume(step), None)  # that step folder itself


def test_resuming_past_a_damaged_checkpoint_is_exact(copy, finished):
    """A damaged file under a manifest written after the damage (it passed before, then SafetensorError naming no
    file): the run goes on from the older checkpoint, exactly."""
    weights = copy / "checkpoints" / "step_000003" / "agents" / "gpt2_bpe" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    write_manifest(weights.parents[2])
    summary = train(resume(copy), copy)
    assert summary["steps_run"] == 1  # step 3 trained again from the checkpoint of step 2
    assert deterministic(read_metrics(copy / "metrics.jsonl")) == deterministic(
        read_metrics(finished[0] / "metrics.jsonl")
    )


@pytest.mark.parametrize("names", [["../esc", "b"], ["a/b", "c"], ["a b", "c"], ["opt", "OPT"]])
def test_agent_names_are_safe_and_unique(names):
    raw = OmegaConf.to_container(compose_config(tiny_overrides("pair")))
    members = list(raw["agents"]["members"].values())
    raw["agents"]["members"] = dict(zip(names, members))
    refused = r"^agents\.members\.(.+: an agent name may hold only|\S+ and agents\.members\.\S+ collide)"
    with pytest.raises(ConfigError, match=refused):
        validate(raw)


def test_evaluate_refuses_an_unpublished_or_damaged_folder_in_one_line(copy, tmp_path, monkeypatch, capsys):
    """Case 5b: a crash's `.tmp_step_*` folder (no manifest, weights cut short) failed with a raw SafetensorError."""
    from hacrl_exp import evaluate

    leftover = Path(shutil.copytree(copy / "checkpoints" / "step_000003", copy / "checkpoints" / ".tmp_step_000004"))
    (leftover / "manifest.json").unlink()
    weights = leftover / "agents" / "opt_char" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    model = Path(shutil.copytree(leftover / "agents" / "opt_char", tmp_path / "model"))  # a bare model folder
    for path, line in [
        (leftover, "is in .tmp_step_000004, a checkpoint that was never completed"),
        (leftover / "agents" / "opt_char", "is in .tmp_step_000004"),
        (model, f"is a damaged model folder: {model / 'model.safetensors'} is truncated"),
    ]:
        monkeypatch.setattr(sys, "argv", ["hacrl_exp.evaluate", f"checkpoints=[{path}]", "benchmarks=[math500]"])
        with pytest.raises(SystemExit) as info:
            evaluate.main()
        err = capsys.readouterr().err
        assert info.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith(f"ConfigError: checkpoints[0]='{path}' ") and line in err
    assert ".tmp_step" not in str([c.path for c in resolve_checkpoints([str(copy)])])  # a run's series skips it


def test_evaluate_leaves_out_or_refuses_a_damaged_checkpoint(copy, caplog):
    from hacrl_exp.evaluation.checkpoints import resolve_checkpoints

    optimizer = copy / "checkpoints" / "step_000003" / "optim" / "opt_char.pt"
    optimizer.write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="hacrl_exp.evaluation.checkpoints"):
        found = resolve_checkpoints([str(copy)])
    assert sorted({c.step for c in found}) == [2] and f"{optimizer} is truncated" in caplog.text
    with pytest.raises(ConfigError, match=f"is a damaged checkpoint: {optimizer} is truncated"):
        resolve_checkpoints([str(optimizer.parents[1])])


@pytest.mark.parametrize(
    "override, line",
    [
        ("tracking.uri=foo://bar", "ConfigError: tracking.uri=foo://bar: MLflow has no store for the scheme 'foo'"),
        ("output_dir={tmp}/afile", "ConfigError: output_dir={tmp}/afile is a file, not a folder"),
    ],
)
def test_evaluate_checks_its_store_and_output_folder_first(copy, tmp_path, monkeypatch, capsys, override, line):
    from hacrl_exp import evaluate

    (tmp_path / "afile").write_text("not a folder")
    monkeypatch.chdir(tmp_path)
    argv = [f"checkpoints=[{copy}]", "benchmarks=[math500]", override.format(tmp=tmp_path), "hydra.run.dir=out"]
    monkeypatch.setattr(sys, "argv", ["hacrl_exp.evaluate", *argv])
    with pytest.raises(SystemExit) as info:
        evaluate.main()
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith(line.format(tmp=tmp_path)) and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "run"]


def test_a_resume_replays_metrics_the_store_missed(copy, finished):
    import sqlite3

    db = Path(shutil.copy(finished[0].parent / "pristine.db", copy.parent / "mlflow.db"))  # this test's own
    store, agent_run = f"sqlite:///{db}", finished[2]["run_ids"]["opt_char"]
    with sqlite3.connect(db) as connection:  # as if the store was down when step 3 was flushed
        connection.execute("DELETE FROM metrics WHERE run_uuid = ? AND step = 3", (agent_run,))
    assert [s for s, _ in mlflow_histories(store, "integrity")["opt_char"]["metrics"]["train/reward_mean"]] == [1, 2]
    train(resume(copy, f"tracking.uri={store}"), copy)
    runs = mlflow_histories(store, "integrity")
    assert [s for s, _ in runs["opt_char"]["metrics"]["train/reward_mean"]] == [1, 2, 3]  # sent from metrics.jsonl
    assert [s for s, _ in runs["gpt2_bpe"]["metrics"]["train/reward_mean"]] == [1, 2, 3]  # and nothing twice
    assert {r["status"] for r in runs.values()} == {"FINISHED"}


def own_store(finished, folder: Path) -> str:
    """A copy of the finished run's store as it was before any test resumed into it."""
    folder.mkdir(exist_ok=True)
    return f"sqlite:///{shutil.copy(finished[0].parent / 'pristine.db', folder / 'mlflow.db')}"


def logged_models(store: str) -> list[tuple[str, str]]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("integrity").experiment_id
    return sorted((m.source_run_id, m.name) for m in client.search_logged_models([experiment]))


def test_resuming_a_finished_run_is_a_no_op_that_says_so(copy, finished, tmp_path, capsys):
    """Case 3: each resume of a finished run logged every final model again (2 logged models became 4)."""
    store = own_store(finished, tmp_path / "store")
    models, histories = logged_models(store), mlflow_histories(store, "integrity")
    assert len(models) == 2
    metrics = (copy / "metrics.jsonl").read_bytes()
    for _ in range(2):
        summary = train(resume(copy, f"tracking.uri={store}"), copy)
        assert summary["steps_run"] == 0 and summary["evals"] == finished[2]["evals"]
        assert "the run already finished at step 3 (trainer.steps=3); nothing is trained" in capsys.readouterr().err
    assert logged_models(store) == models and mlflow_histories(store, "integrity") == histories
    assert (copy / "metrics.jsonl").read_bytes() == metrics


def record_store(step: Path, uri: str) -> None:
    """Make a checkpoint record another store (as if the run had logged there), its manifest written again."""
    state = json.loads((step / "state.json").read_text())
    (step / "state.json").write_text(json.dumps({**state, "tracking_uri": uri}, indent=1))
    write_manifest(step)


def test_a_moved_store_is_refused_and_a_new_one_gets_the_runs_again(copy, finished, tmp_path, capsys, caplog):
    """Case 4: the store a checkpoint recorded is gone: one line, and no empty store made at the old path (before: an
    empty mlflow.db there, then `Run with id=… not found`). The store where it is now: the same runs go on. A new
    store (the docs allow it; it failed the same way): the runs are created there and the history replayed."""
    step = copy / "checkpoints" / "step_000002"
    gone = tmp_path / "moved_away" / "mlflow.db"  # its folder is still there, the store file is not
    gone.parent.mkdir()
    record_store(step, f"sqlite:///{gone}")
    with pytest.raises(ConfigError, match=rf"its MLflow store sqlite:///{gone} is gone \(moved or deleted\)"):
        train(resume(step), copy)
    assert not any(gone.parent.iterdir())

    moved = own_store(finished, tmp_path / "moved")  # where the store is now: the runs go on (step 3 again)
    summary = train(resume(step, f"tracking.uri={moved}"), copy)
    assert {r["run_id"] for r in mlflow_histories(moved, "integrity").values()} == set(finished[2]["run_ids"].values())
    assert summary["run_ids"] == finished[2]["run_ids"] and len(logged_models(moved)) == 2

    new = f"sqlite:///{tmp_path / 'new' / 'mlflow.db'}"
    (tmp_path / "new").mkdir()
    with caplog.at_level(logging.WARNING, logger="hacrl_exp.tracking"):
        summary = train(resume(copy / "checkpoints" / "step_000002", f"tracking.uri={new}"), copy)
    assert "does not hold this run's runs" in caplog.text and summary["run_ids"] != finished[2]["run_ids"]
    runs = mlflow_histories(new, "integrity")
    assert {r["status"] for r in runs.values()} == {"FINISHED"} and len(logged_models(new)) == 2
    reference = mlflow_histories(own_store(finished, tmp_path / "reference"), "integrity")  # the first run's

    def values(histories: dict) -> dict:
        return {(a, k, s): v for a, r in histories.items() for k, points in r["metrics"].items() for s, v in points}

    assert values(runs) == pytest.approx(values(reference), rel=1e-6, abs=1e-6)  # replayed steps 0-2, step 3 again


def test_a_checkpoint_from_before_the_counter_sampler_resumes_with_its_sampler_or_is_refused():
    """Before issue 36 checkpoints recorded rollout.sample_stream (agent or row) and rollout.sampler=multinomial (or
    held neither key). One that sampled by multinomial from the agent stream resumes with rollout.sampler=multinomial;
    under the new default (counter) it is refused, naming the key; a row-stream one is refused either way."""
    from hacrl_exp.trainer.runfolder import check_same_config, config_hash, config_params

    multinomial = config_params(preflight([*OVERRIDES, "rollout.sampler=multinomial"]))
    for recorded in ({"sample_stream": "agent", "sampler": "multinomial"}, {}):
        old = json.loads(json.dumps(multinomial))
        old["rollout"].pop("sampler")
        old["rollout"].update(recorded)
        state = {"config": old, "config_hash": config_hash(old)}
        check_same_config(multinomial, state, "old-run")
        with pytest.raises(ConfigError, match=r"in rollout.sampler \(<unset> → counter\)"):
            check_same_config(config_params(preflight(OVERRIDES)), state, "old-run")
    old["rollout"]["sample_stream"] = "row"
    state = {"config": old, "config_hash": config_hash(old)}
    with pytest.raises(ConfigError, match=r"in rollout.sample_stream \(row → <unset>\)"):
        check_same_config(multinomial, state, "old-run")


def test_a_checkpoint_from_before_issue_27s_keys_resumes_at_their_defaults():
    """task.heldout_seed, task.grader_forms and an agent's warm_start.target_accuracy / check_every /
    check_per_category came after checkpoints were written: at their defaults they are left out of the comparison;
    a target accuracy (another warm start) is refused."""
    from hacrl_exp.trainer.runfolder import check_same_config, config_hash, config_params

    params = config_params(preflight(OVERRIDES))
    old = json.loads(json.dumps(params))
    del old["task"]["heldout_seed"], old["task"]["grader_forms"]
    for member in old["agents"]["members"].values():
        for key in ("target_accuracy", "check_every", "check_per_category"):
            del member["warm_start"][key]
    state = {"config": old, "config_hash": config_hash(old)}
    check_same_config(params, state, "old-run")
    name = next(iter(params["agents"]["members"]))
    target = config_params(preflight([*OVERRIDES, f"agents.members.{name}.warm_start.target_accuracy=0.5"]))
    with pytest.raises(ConfigError, match=rf"agents.members.{name}.warm_start.target_accuracy \(<unset> → 0.5\)"):
        check_same_config(target, state, "old-run")
