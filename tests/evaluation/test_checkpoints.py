"""Checkpoint resolution on a real trainer run: model folder, step folder, run folder, agent filter, bad paths."""

from __future__ import annotations

import pytest

from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.checkpoints import is_model_dir, resolve_checkpoints


def test_run_folder_is_the_whole_series(tiny_run):
    found = resolve_checkpoints([str(tiny_run["run_dir"])])
    assert [(c.agent, c.step) for c in found] == [("gpt2_bpe", 1), ("opt_char", 1), ("gpt2_bpe", 2), ("opt_char", 2)]
    assert all(c.run_ids == tiny_run["run_ids"] and c.run_dir == tiny_run["run_dir"] for c in found)
    assert resolve_checkpoints([str(tiny_run["run_dir"] / "checkpoints")]) == found


def test_step_and_model_folders(tiny_run):
    step = tiny_run["run_dir"] / "checkpoints" / "step_000002"
    assert [c.label for c in resolve_checkpoints([str(step)])] == ["gpt2_bpe@2", "opt_char@2"]
    model = step / "agents" / "opt_char"
    assert is_model_dir(model)
    (single,) = resolve_checkpoints([str(model)])
    assert (single.agent, single.step, single.run_ids[""]) == ("opt_char", 2, tiny_run["run_ids"][""])
    (only,) = resolve_checkpoints([str(step)], agents=["gpt2_bpe"])
    assert only.agent == "gpt2_bpe"


def test_bad_checkpoints(tiny_run, tmp_path):
    with pytest.raises(ConfigError, match=r"checkpoints\[0\]='.*nope' does not exist"):
        resolve_checkpoints([str(tmp_path / "nope")])
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="is not a model directory \\(config.json found, but no weights"):
        resolve_checkpoints([str(tmp_path)])
    with pytest.raises(ConfigError, match="checkpoints is empty"):
        resolve_checkpoints([])
    with pytest.raises(ConfigError, match=r"\['llama'\] not among the checkpoints' agents \['gpt2_bpe', 'opt_char'\]"):
        resolve_checkpoints([str(tiny_run["run_dir"])], agents=["llama"])
