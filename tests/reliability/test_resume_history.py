"""Resume never shortens history (docs/reliability.md, "Resume history and secrets (issue 40)").

One finished tiny run (a checkpoint every step) is made once through the real command line; each test works on a
copy of it (and of its store) and resumes it with `python -m hacrl_exp.run trainer.resume=<run>` run in-process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hacrl_exp.agents.manifest import write_manifest
from hacrl_exp.crash_drill import deterministic
from hacrl_exp.trainer.metrics import read_metrics
from tests.cli import run_cli
from tests.e2e.tiny import tiny_overrides

OVERRIDES = [*tiny_overrides("pair", 3), "trainer.checkpoint_every=1", "tracking.experiment=history"]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def train_cli(folder: Path, *extra: str):
    """`python -m hacrl_exp.run` with the tiny overrides, logging to folder/mlflow.db, Hydra's files in folder."""
    hydra = folder / f"hydra-{len(list(folder.glob('hydra-*')))}"
    store = f"tracking.uri=sqlite:///{folder / 'mlflow.db'}"
    return run_cli("hacrl_exp.run", [*OVERRIDES, store, f"hydra.run.dir={hydra}", *extra], cwd=folder)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 3-step run with checkpoints of steps 2 and 3, and its store, under one folder."""
    folder = tmp_path_factory.mktemp("history")
    result = train_cli(folder, f"trainer.output_dir={folder / 'run'}")
    assert result.returncode == 0, result.stderr
    return folder


@pytest.fixture
def copy(finished, tmp_path) -> Path:
    """A copy of the finished run and its store; returns the run folder."""
    shutil.copytree(finished / "run", tmp_path / "run")
    shutil.copy(finished / "mlflow.db", tmp_path / "mlflow.db")
    return tmp_path / "run"


def resume(run: Path, *extra: str):
    return train_cli(run.parent, f"trainer.resume={run}", *extra)


def edit_state(step_folder: Path, edit, manifest: str = "deleted") -> None:
    """Change a checkpoint's state.json by `edit(state)`, then delete its manifest or write it again (a hostile
    edit passes any manifest check that way)."""
    state = json.loads((step_folder / "state.json").read_text())
    (step_folder / "state.json").write_text(json.dumps(edit(state)))
    if manifest == "deleted":
        (step_folder / "manifest.json").unlink()
    else:
        write_manifest(step_folder)


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def set_key(key, value):
    return lambda state: {**state, key: value}


def drop_key(key):
    return lambda state: {k: v for k, v in state.items() if k != key}


INVALID_STATES = {
    "step -5, manifest deleted": (set_key("step", -5), "deleted", "'step' is -5, not a non-negative int"),
    "step 7 in step_000003, manifest rewritten": (set_key("step", 7), "rewritten", "but the folder is step_000003"),
    "step '3'": (set_key("step", "3"), "rewritten", "'step' is \"3\", not an int"),
    "no counters": (drop_key("counters"), "deleted", "no 'counters'"),
}


@pytest.mark.parametrize("case", list(INVALID_STATES))
def test_an_invalid_checkpoint_state_is_skipped_and_no_history_is_lost(copy, case):
    """Before: `"step": -5` emptied metrics.jsonl (10 kB), then a ValueError traceback. Now the checkpoint is skipped
    for the previous one, with a line; the rows of step 3 are moved aside, and the replay writes them again equal."""
    edit, manifest, why = INVALID_STATES[case]
    newest = copy / "checkpoints" / "step_000003"
    edit_state(newest, edit, manifest)
    before = lines(copy / "metrics.jsonl")
    result = resume(copy)
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert f"damaged checkpoint, not used: {newest / 'state.json'} is invalid (" in output and why in output
    assert f"resuming from {copy / 'checkpoints' / 'step_000002'}" in output
    after, aside = lines(copy / "metrics.jsonl"), lines(copy / "metrics.jsonl.replaced-1")
    step_3 = [line for line in before if json.loads(line)["step"] == 3]
    assert aside == step_3 and after[: len(before) - len(step_3)] == before[: len(before) - len(step_3)]
    rows = lambda raw: deterministic([json.loads(line) for line in raw])  # noqa: E731 - timings aside
    assert rows(after) == rows(before)  # step 3 trained again from step 2: the same numbers


def test_no_valid_checkpoint_is_one_line_and_nothing_is_written(copy):
    edit_state(copy / "checkpoints" / "step_000003", set_key("step", -5))
    edit_state(copy / "checkpoints" / "step_000002", set_key("capability", []), "rewritten")
    before = snapshot(copy.parent)
    result = resume(copy)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"ConfigError: trainer.resume={copy} holds no intact checkpoint")
    assert snapshot(copy.parent) == before  # metrics.jsonl untouched, no hydra folder


def test_garbled_lines_are_moved_aside_and_reported_never_dropped(copy):
    """Before: a garbled line in the middle was dropped silently on resume (non-UTF-8 bytes: a traceback). Now every
    line that is not a row is moved into metrics.jsonl.replaced-<n> and named in one warning; the last line cut short
    by a kill is moved there too, with a note."""
    metrics = copy / "metrics.jsonl"
    original = lines(metrics)
    garbage, latin1, cut = b'{"step": 1, "agent": "opt_ch\n', b"caf\xe9 not json\n", original[-1][:30]
    metrics.write_bytes(b"".join([*original[:4], garbage, *original[4:8], latin1, *original[8:], cut]))
    result = resume(copy)  # the finished run: nothing trained, the file is cut back to step 3
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    count = len(original) + 3
    assert f"moved 2 garbled line(s) (line 5, 10) and a last line cut short (line {count}" in output
    assert lines(metrics) == original and lines(copy / "metrics.jsonl.replaced-1") == [garbage, latin1, cut + b"\n"]
    assert read_metrics(metrics)  # readable as a whole again


def test_a_checkpoint_of_another_run_is_refused_naming_both(copy, tmp_path):
    """Two runs of the same config: run B's checkpoints folder symlinked to run A's, or A's newest step folder
    copied into B. Before: B resumed with A's weights, counters and MLflow runs. Now: one line naming both run ids."""
    other = tmp_path / "other"
    result = train_cli(tmp_path, f"trainer.output_dir={other}", "trainer.steps=1")
    assert result.returncode == 0, result.stderr
    ours, theirs = (run / "run_id" for run in (copy, other))
    shutil.copytree(copy / "checkpoints" / "step_000003", other / "checkpoints" / "step_000003")
    (other / "checkpoints" / "latest").write_text("step_000003")
    before = snapshot(other)
    result = resume(other)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"belongs to run {ours.read_text().strip()}" in result.stderr
    assert f"its run folder {other} holds run {theirs.read_text().strip()}" in result.stderr
    assert snapshot(other) == before
    shutil.rmtree(other / "checkpoints")
    (other / "checkpoints").symlink_to(copy / "checkpoints")
    theirs_before = snapshot(copy)
    result = resume(other, "trainer.steps=4")  # a symlinked checkpoints folder: refused as a symlink first
    assert result.returncode == 2 and f"{other / 'checkpoints'} is a symlink" in result.stderr, result.stderr
    result = resume(other, "trainer.steps=4", "--follow-symlinks")  # followed on request: then it is another run's
    assert result.returncode == 2 and f"belongs to run {ours.read_text().strip()}" in result.stderr, result.stderr
    assert (other / "metrics.jsonl").read_bytes() == before["metrics.jsonl"] and snapshot(copy) == theirs_before


def test_a_checkpoint_without_a_run_id_still_resumes(copy):
    """Checkpoints written before run ids existed carry none: they resume, and the run gets an id from then on."""
    for step in sorted((copy / "checkpoints").glob("step_*")):
        edit_state(step, drop_key("run_id"), "rewritten")
    (copy / "run_id").unlink()
    result = resume(copy, "trainer.steps=4")
    assert result.returncode == 0, result.stderr
    run_id = (copy / "run_id").read_text().strip()
    assert json.loads((copy / "checkpoints" / "step_000004" / "state.json").read_text())["run_id"] == run_id


def test_a_latest_pointer_out_of_the_run_is_not_followed(copy, tmp_path):
    """Before: `latest` holding `../../theirs/checkpoints/step_000003` was followed, and the resume went on in the
    other run's folder. Now `latest` names a step_N folder beside it or is ignored: the newest step folder is used."""
    theirs = Path(shutil.copytree(copy, tmp_path / "theirs"))
    shutil.rmtree(copy / "checkpoints" / "step_000003")
    (copy / "checkpoints" / "latest").write_text("../../theirs/checkpoints/step_000003")
    before = snapshot(theirs)
    result = resume(copy)
    assert result.returncode == 0, result.stderr
    assert (copy / "checkpoints" / "step_000003").is_dir() and snapshot(theirs) == before
