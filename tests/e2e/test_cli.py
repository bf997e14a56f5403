"""The command line as users type it: the design card's multirun (in this process, tests/cli.py), and two jobs at once
through the joblib launcher (a real process: its workers are processes)."""

import json
import subprocess
import sys
from pathlib import Path

from tests.cli import run_cli
from tests.e2e.tiny import tiny_overrides


def test_design_card_multirun(tmp_path):
    overrides = [o for o in tiny_overrides("three_way", steps=2) if not o.startswith("agents=")]
    command = ["-m", "agents=three_way", "mechanisms.omega=false", *overrides, f"hydra.sweep.dir={tmp_path}"]
    result = run_cli("hacrl_exp.run", command)  # in this process; the next test starts `python -m hacrl_exp.run`
    assert result.returncode == 0, result.stderr[-2000:]
    summaries = sorted(Path(tmp_path).glob("*/summary.json"))
    assert len(summaries) == 1
    summary = json.loads(summaries[0].read_text())
    assert summary["last_step"] == 2 and set(summary["counters"]) == {"opt_char", "gpt2_bpe", "llama_char"}
    config = json.loads((summaries[0].parent / "config.json").read_text())
    assert config["mechanisms"]["omega"] is False
    assert "held-out accuracy" in result.stdout


def test_parallel_jobs_share_a_new_mlflow_store(tmp_path, monkeypatch):
    """Two jobs at once (the grids' joblib launcher) on a store that does not exist yet: both runs are recorded."""
    import mlflow

    uri = f"sqlite:///{tmp_path / 'new' / 'mlflow.db'}"
    (tmp_path / "new").mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    command = [sys.executable, "-m", "hacrl_exp.run", "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    command += [*tiny_overrides("pair", steps=1), "trainer.save_final_models=false", "seed=0,1"]
    result = subprocess.run([*command, f"hydra.sweep.dir={tmp_path / 'sweep'}"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    runs = mlflow.MlflowClient(uri).search_runs(
        [mlflow.MlflowClient(uri).get_experiment_by_name("hacrl").experiment_id], "tags.role = 'parent'"
    )
    assert sorted(r.data.tags["seed"] for r in runs) == ["0", "1"]
    assert {r.info.status for r in runs} == {"FINISHED"}
