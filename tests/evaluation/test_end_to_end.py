"""A tiny trainer checkpoint evaluated on all seven benchmarks (limit 2) and arithmetic, through the evaluate
config and the shared evaluate_agent; results in MLflow with CIs and readable parquet artifacts; CLI bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields

import mlflow
import pandas as pd
import pytest
import torch

from hacrl_exp.config.evaluate_schema import compose_evaluate, validate_evaluate
from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.checkpoints import load_checkpoint_agent, resolve_checkpoints
from hacrl_exp.evaluation.inputs import check_inputs
from hacrl_exp.evaluation.pipeline import headline_table, run_evaluation
from hacrl_exp.evaluation.runner import EvalSettings, evaluate_agent
from tests.cli import run_cli

PAPER = ["math500", "math", "gsm8k", "aime2025", "amc23", "minerva", "olympiadbench"]


def config(*overrides):
    settings = validate_evaluate(compose_evaluate(list(overrides)))
    check_inputs(settings)
    return settings


def test_all_benchmarks_into_mlflow(tiny_run, data_dir, tmp_path):
    step = tiny_run["run_dir"] / "checkpoints" / "step_000002"
    cfg = config(
        f"checkpoints=[{step}]",
        f"benchmarks=[{','.join(PAPER)},arithmetic]",
        f"data_dir={data_dir}",
        "limit=2",
        "bootstrap=200",
        "grader.workers=1",
        f"tracking.uri={tiny_run['uri']}",
    )
    summary = run_evaluation(cfg, tmp_path)
    assert set(summary["agent"]) == {"opt_char", "gpt2_bpe"} and set(summary["step"]) == {2}
    table = headline_table(summary)
    assert "best_at_30" in table and table.count("\n") == 1 + 2 * 8
    assert "| forms=requested [95% CI] | forms=value [95% CI] |" in table  # the policy, and the other one beside it

    client = mlflow.MlflowClient(tiny_run["uri"])
    training = client.get_run(tiny_run["run_ids"][""])
    runs = client.search_runs([training.info.experiment_id], "tags.role = 'eval'")
    assert len(runs) == 2  # one per (checkpoint, agent), in the training run's experiment
    run = next(r for r in runs if r.data.tags["agent"] == "opt_char")
    tags, metrics, params = run.data.tags, run.data.metrics, run.data.params
    assert tags["training_run_id"] == tiny_run["run_ids"][""] and tags["step"] == "2"
    assert tags["training_agent_run_id"] == tiny_run["run_ids"]["opt_char"] and run.info.status == "FINISHED"
    for name in PAPER + ["arithmetic"]:
        head = "best_at_30" if name == "aime2025" else "accuracy"
        for key in (head, f"{head}_ci_low", f"{head}_ci_high", "problems", "timeouts", "no_answer_rate"):
            assert f"{name}/{key}" in metrics, (name, key)
        assert metrics[f"{name}/{head}_ci_low"] <= metrics[f"{name}/{head}"] <= metrics[f"{name}/{head}_ci_high"]
        assert metrics[f"{name}/problems"] == 2
        assert (f"{name}/{head}_forms_value" in metrics) == (name != "arithmetic")  # exact match reads no form
    assert {"aime2025/pass_at_8", "aime2025/maj_at_30", "aime2025/avg_at_30", "arithmetic/accuracy/add2"} <= set(
        metrics
    )
    assert params["math500/prompt_template"].endswith("output the final answer within \\boxed{}.")
    assert params["arithmetic/prompt_template"] == "{problem}" and params["math500/prompt_format"] == "plain"
    assert params["grader.forms"] == "requested"
    assert [m.step for m in client.get_metric_history(run.info.run_id, "math500/accuracy")] == [2]

    local = client.download_artifacts(run.info.run_id, "results", str(tmp_path / "dl"))
    problems = pd.read_parquet(f"{local}/problems.parquet")
    samples = pd.read_parquet(f"{local}/samples.parquet")
    assert len(problems) == 8 * 2 and len(samples) == 7 * 2 + 2 * 30  # aime2025 draws 30 samples per problem
    assert {"benchmark", "problem_id", "category", "n", "correct", "accuracy", "agent", "step", "run_id"} <= set(
        problems
    )
    assert set(samples["reason"]) <= {"correct", "wrong", "no_answer", "timeout", "grader_error"}
    trainer_record = {"id", "category", "reward", "reason", "prompt", "response", "extracted", "gold"}
    assert trainer_record <= set(samples)  # the same columns as the trainer's per-problem eval records
    assert set(samples["grader_forms"]) == {"requested"} and samples["reward"].equals(samples["reward_forms_requested"])
    assert (samples["reward_forms_value"] >= samples["reward"]).all()  # value only drops the requested-form check
    assert (tmp_path / "opt_char_step2" / "summary.parquet").is_file() and (tmp_path / "summary.parquet").is_file()


def test_settings_copy_every_evaluate_setting_once():
    """EvalSettings.from_config is the one copy of the evaluate config into the harness's settings: every field is
    set from it (none left at its default here)."""
    overrides = ["data_dir=data", "source=local", "limit=3", "samples=4", "max_new_tokens=9", "seed=7", "bootstrap=11",
                 "sampling.temperature=0.5", "sampling.top_p=0.9", "sampling.top_k=5", "grader.timeout_s=2.0",
                 "grader.workers=3", "grader.forms=value"]  # fmt: skip
    cfg = validate_evaluate(compose_evaluate(overrides))  # the schema only: no data folder or checkpoint needed
    settings = EvalSettings.from_config(cfg)
    assert settings == EvalSettings("data", "local", 3, 4, 0.5, 0.9, 5, 9, 7, 11, 2.0, 3, "value")
    assert all(getattr(settings, f.name) != f.default for f in fields(EvalSettings))


def test_evaluate_agent_in_memory_keeps_the_callers_rng(tiny_run):
    (ckpt,) = resolve_checkpoints([str(tiny_run["run_dir"] / "checkpoints" / "step_000002")], agents=["opt_char"])
    agent = load_checkpoint_agent(ckpt)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    settings = EvalSettings(samples=4, temperature=1.0, bootstrap=50, seed=5)
    first = evaluate_agent(agent, ["arithmetic"], settings)
    assert torch.equal(before, torch.get_rng_state())
    again = evaluate_agent(agent, ["arithmetic", "arithmetic_bare"], settings)
    same = again.samples[again.samples["benchmark"] == "arithmetic"].reset_index(drop=True)
    assert first.samples["response"].tolist() == same["response"].tolist()  # seeded per benchmark
    metrics = again.metrics(prefix="eval/")
    assert "eval/arithmetic/accuracy" in metrics and "eval/arithmetic_bare/accuracy_ci_high" in metrics
    assert len(first.problems) == 600 and first.problems["n"].eq(4).all()


@pytest.mark.parametrize(
    "overrides, needle",
    [
        (["benchmarks=[math5000]"], "benchmark 'math5000' is unknown. Did you mean 'math500'?"),
        (["data_dir=/nowhere"], "data_dir='/nowhere' is not a folder"),
        (["samples=4"], "samples=4 with temperature 0 (greedy) repeats one answer"),
        (["limt=3"], "limt is not an evaluate config key. Did you mean limit?"),
        (["limit=0"], "limit=0 is out of range"),
        (["grader.workerz=2"], "grader.workerz is not an evaluate config key. Did you mean grader.workers?"),
    ],
)
def test_bad_config(tiny_run, overrides, needle):
    with pytest.raises(ConfigError) as err:
        config(f"checkpoints=[{tiny_run['run_dir']}]", *overrides)
    assert needle in str(err.value)


def test_cli_bad_input_is_one_line_exit_2(tiny_run, tmp_path):
    bad_row = tmp_path / "data"
    bad_row.mkdir()
    (bad_row / "amc23.jsonl").write_text('{"id": "a", "problem": "p", "answer": "1"}\n{"id": "b", "answer": "2"}\n')
    cases = [
        ([f"checkpoints=[{tmp_path}]"], f"checkpoints[0]='{tmp_path}' is not a model directory"),
        ([f"checkpoints=[{tiny_run['run_dir']}]", "benchmarks=[gsm9k]"], "benchmark 'gsm9k' is unknown"),
        (
            [f"checkpoints=[{tiny_run['run_dir']}]", "benchmarks=[amc23]", f"data_dir={bad_row}"],
            "benchmark amc23: " + str(bad_row / "amc23.jsonl") + ":2: field 'problem' is missing",
        ),
        (
            [f"checkpoints=[{tiny_run['run_dir']}]", "agents=[llama]"],
            "agents=['llama']: ['llama'] not among the checkpoints' agents ['gpt2_bpe', 'opt_char']",
        ),
    ]
    for args, needle in cases:  # in this process (the `python -m` run is the next test's)
        proc = run_cli("hacrl_exp.evaluate", [*args, "tracking.backend=none"], cwd=tmp_path)  # outputs/ not in the repo
        assert proc.returncode == 2, proc.stderr
        assert needle in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_cli_agents_picks_those_agents_of_a_checkpoint(tiny_run, tmp_path):
    """`agents=[opt_char]` as docs/evaluation.md shows it: conf/agents/ (a training group) must not capture it."""
    step = tiny_run["run_dir"] / "checkpoints" / "step_000002"
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hacrl_exp.evaluate",
            f"checkpoints=[{step}]",
            "agents=[opt_char]",
            "benchmarks=[arithmetic]",
            "limit=2",
            "bootstrap=0",
            "grader.workers=1",
            "tracking.backend=none",
            f"output_dir={out}",
            f"hydra.run.dir={tmp_path / 'hydra'}",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    summary = pd.read_parquet(out / "summary.parquet")
    assert set(summary["agent"]) == {"opt_char"} and set(summary["step"]) == {2}
    assert (out / "opt_char_step2").is_dir() and not (out / "gpt2_bpe_step2").exists()
    assert "opt_char" in proc.stdout and "gpt2_bpe" not in proc.stdout


def test_config_composes_with_defaults(tiny_run):
    cfg = config(f"checkpoints=[{tiny_run['run_dir']}]")
    assert cfg.benchmarks == ["math500"] and cfg.grader.workers == 2 and cfg.samples is None
    assert json.loads(json.dumps(cfg.tracking.__dict__))["backend"] == "mlflow"
