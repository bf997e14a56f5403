"""End-to-end runs of tiny agents: every algorithm with N = 2 and N = 3, MLflow, checkpoints, and resume."""

import json
import math
import time
from pathlib import Path

import pytest

from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import is_timing_key, read_metrics
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides


def run(tmp_path, *extra, agents="pair", steps=3):
    config = preflight(tiny_overrides(agents, steps) + list(extra))
    summary = train(config, tmp_path)
    return summary, read_metrics(f"{summary['output_dir']}/metrics.jsonl")


@pytest.mark.parametrize("agents", ["pair", "three_way"])
@pytest.mark.parametrize("algorithm", ["hacpo", "naive", "gspo", "gspo_x2", "gspo_update_matched"])
def test_three_steps(tmp_path, agents, algorithm):
    before = time.process_time()  # pytest's process has run other tests already, as a multirun worker runs jobs
    summary, rows = run(tmp_path, f"algorithm={algorithm}", "tracking.backend=none", agents=agents)
    spent = time.process_time() - before
    n_agents = 2 if agents == "pair" else 3
    g = 8 if algorithm == "gspo_x2" else 4
    assert summary["last_step"] == 3
    for name, counts in summary["counters"].items():
        assert counts["rollouts_total"] == 3 * 4 * g, name
    step_rows = [r for r in rows if r["agent"] and r["step"] == 3 and "train/reward_mean" in r]
    assert len(step_rows) == n_agents
    for row in step_rows:
        assert all(math.isfinite(v) for k, v in row.items() if isinstance(v, float)), row
        assert row["memory/params_mib"] > 0 and row["memory/optimizer_mib"] > 0  # per-agent memory, every step
        blocks = n_agents if algorithm in ("hacpo", "naive") else 1
        assert row["train/updates"] == 2 * blocks * (1 if algorithm in ("gspo", "hacpo", "naive") else 2)
        check_costs(rows, row["agent"], rows_per_step=blocks * 4 * g, passes=2 if "matched" in algorithm else 1)
        if algorithm == "hacpo":
            sources = [k for k in row if k.startswith("cross/from_") and k.endswith("/rows_run")]
            assert len(sources) == n_agents - 1
    assert (tmp_path / "checkpoints" / "latest").is_file()
    job = [r["cost/process_seconds"] for r in rows if r["agent"] == "" and "cost/process_seconds" in r]
    assert 0 < job[-1] <= spent  # this job's CPU seconds, not the process's since it started


def check_costs(rows: list[dict], agent: str, rows_per_step: int, passes: int) -> None:
    """cost/* are running totals that agree with the per-step metrics they count (docs/metrics.md)."""
    mine = [r for r in rows if r["agent"] == agent and "train/reward_mean" in r]
    last = mine[-1]
    assert last["cost/generated_rollouts"] == last["train/rollouts_total"]
    assert last["cost/generated_tokens"] == last["train/tokens_total"]
    assert last["cost/updates"] == sum(r["train/updates"] - r["train/skipped_updates"] for r in mine)
    trained = sum(round(r["train/rows_run_share"] * rows_per_step) * passes for r in mine)
    assert last["cost/trained_rows"] == trained and (last["cost/backward_tokens"] > 0) == (trained > 0)
    assert last["cost/forward_tokens"] > last["cost/backward_tokens"]  # + scoring the old log-probs
    assert all(a["cost/process_seconds"] < b["cost/process_seconds"] for a, b in zip(mine, mine[1:]))
    job = [r["cost/process_seconds"] for r in rows if r["agent"] == "" and "cost/process_seconds" in r]
    assert len(job) == 3 and job == sorted(job) and job[-1] > last["cost/process_seconds"]
    assert [r["warm_start/steps_run"] for r in rows if r["agent"] == agent and "warm_start/steps_run" in r] == [150]


def test_mlflow_parent_and_agent_runs(tmp_path):
    import mlflow

    summary, _ = run(tmp_path, "+tracking.tags.grid=smoke", steps=2)
    client = mlflow.MlflowClient()
    parent = client.get_run(summary["run_ids"][""])
    assert parent.data.params["algorithm.name"] == "hacpo"
    assert parent.data.tags["role"] == "parent" and parent.info.status == "FINISHED"
    child = client.get_run(summary["run_ids"]["opt_char"])
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert child.data.params["lr"] == "0.001"
    history = client.get_metric_history(child.info.run_id, "train/reward_mean")
    assert [m.step for m in history] == [1, 2]
    assert {
        "cross/from_gpt2_bpe/omega",
        "cross/from_gpt2_bpe/rows_run",
        "eval/accuracy/mean",
        "train/tokens_total",
    } <= set(child.data.metrics)
    assert parent.data.tags["grid"] == child.data.tags["grid"] == "smoke"
    # names, tags and provenance (docs/tracking.md)
    assert parent.info.run_name == "hacpo-opt_char+gpt2_bpe-s0"  # train() outside Hydra: no overrides to name
    assert child.info.run_name == "hacpo-opt_char+gpt2_bpe-s0/opt_char"
    for mlrun in (parent, child):
        tags = mlrun.data.tags
        assert tags["method"] == "hacpo" and tags["seed"] == "0" and tags["task"] == "arithmetic"
        assert tags["agents"] == "opt_char+gpt2_bpe" and tags["mlflow.source.name"]
        assert len(tags["mlflow.source.git.commit"]) == 40 and tags["git_dirty"] in ("true", "false")
        assert [d.dataset.name for d in mlrun.inputs.dataset_inputs] == ["arithmetic/eval"]
    experiment = client.get_experiment(parent.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    link = f"#/experiments/{experiment.experiment_id}/runs?workflowType=machine_learning"  # opens "Model training"
    assert f"{link}&viewStateShareKey=hacrl-final-accuracy" in summary["mlflow_ui"]
    assert "python -m hacrl_exp.ui --store sqlite:///" in summary["mlflow_ui"]
    assert "rollout.vllm.gpu_memory_utilization" not in parent.data.params  # rollout=hf: vllm settings pruned
    assert "task.hf_train" not in parent.data.params and parent.data.params["task.tiers"] == "['add2']"
    # the parent's summary: final held-out accuracy, rollouts, tokens, seconds
    final = parent.data.metrics
    assert final["final/accuracy_mean/opt_char"] == round(summary["evals"][2]["opt_char"]["accuracy/mean"], 4)
    assert final["final/rollouts_total/gpt2_bpe"] == 2 * 4 * 4 and final["final/time_total_s"] > 0
    assert "final/accuracy/add2/gpt2_bpe" in final
    # the final agents as MLflow transformers models that load back as a text-generation pipeline
    import mlflow.transformers

    models = mlflow.search_logged_models(
        experiment_ids=[parent.info.experiment_id], filter_string=f"source_run_id = '{child.info.run_id}'",
        output_format="list",
    )  # fmt: skip
    assert len(models) == 1
    pipeline = mlflow.transformers.load_model(models[0].model_uri)
    assert pipeline("1+2=", max_new_tokens=4, do_sample=False)[0]["generated_text"].startswith("1+2=")
    # per-problem greedy answers of every evaluation, for paired tests across runs
    records = client.download_artifacts(child.info.run_id, "eval/step_000002/opt_char.jsonl", str(tmp_path))
    rows = [json.loads(line) for line in Path(records).read_text().splitlines()]
    assert rows and {"id", "category", "reward", "reason", "prompt", "response", "extracted", "gold"} <= set(rows[0])
    final = summary["evals"][2]["opt_char"]["accuracy/mean"]
    by_category = {}
    for row in rows:
        by_category.setdefault(row["category"], []).append(row["reward"])
    assert abs(final - sum(sum(v) / len(v) for v in by_category.values()) / len(by_category)) < 1e-12


def test_resume_matches_uninterrupted_run(tmp_path):
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    _, full = run(full_dir, "trainer.checkpoint_every=2", steps=4)
    _, _ = run(cut_dir, "trainer.checkpoint_every=2", "trainer.stop_after=2", steps=4)
    summary, resumed = run(tmp_path / "ignored", f"trainer.resume={cut_dir}", steps=4)
    assert summary["output_dir"] == str(cut_dir) and summary["steps_run"] == 2

    def comparable(rows):
        return {
            (r["step"], r["agent"], k): v
            for r in rows
            for k, v in r.items()
            if k not in ("step", "agent") and not is_timing_key(k)
        }

    a, b = comparable(full), comparable(resumed)
    assert a.keys() == b.keys()
    for key in a:
        assert b[key] == pytest.approx(a[key], rel=1e-6, abs=1e-6), key
    state = json.loads((cut_dir / "checkpoints" / "step_000004" / "state.json").read_text())
    assert (
        state["counters"]
        == json.loads((full_dir / "checkpoints" / "step_000004" / "state.json").read_text())["counters"]
    )


def test_resume_continues_the_mlflow_runs(tmp_path):
    import mlflow

    first, _ = run(tmp_path, "trainer.stop_after=1", "trainer.checkpoint_every=1", steps=2)
    second, _ = run(tmp_path / "other", f"trainer.resume={tmp_path}", steps=2)
    assert second["run_ids"] == first["run_ids"]
    client = mlflow.MlflowClient()
    assert client.get_run(first["run_ids"][""]).info.status == "FINISHED"
    history = client.get_metric_history(first["run_ids"]["gpt2_bpe"], "train/reward_mean")
    assert sorted(m.step for m in history) == [1, 2]


def test_agents_load_from_a_local_save_pretrained_folder(tmp_path):
    """The real-model path (`model.source=pretrained`) on local folders: safetensors, no remote code."""
    from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
    from hacrl_exp.tasks.arithmetic import ArithmeticTask

    task = ArithmeticTask(tiers=["add2"])
    overrides = []
    for name, arch, kind in (("opt_char", "opt", "char"), ("gpt2_bpe", "gpt2", "bpe")):
        tokenizer = build_tokenizer(kind, task.alphabet, task.sample_texts(300), vocab_size=48)
        folder = tmp_path / name
        build_tiny_model(arch, tokenizer, 32, 1, 4).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        overrides += [f"agents.members.{name}.model.source=pretrained", f"agents.members.{name}.model.path={folder}"]
    summary, rows = run(tmp_path / "run", "tracking.backend=none", *overrides, steps=1)
    assert summary["last_step"] == 1
    assert any(r.get("train/rollouts_total") == 16 for r in rows)


@pytest.mark.parametrize(
    "extra, agents",
    [
        (["algorithm=grpo", "algorithm.kl_coef=0.01"], "solo"),
        (["algorithm.kl_coef=0.01", "algorithm.kl_aggregation=token_mean"], "pair"),
        (
            ["algorithm.restart_u_per_source=true", "algorithm.capability_scope=category", "task.tiers=[add2,add3]"],
            "three_way",
        ),
        (["mechanisms.clip=false", "mechanisms.stepwise=false", "algorithm.is_factor_on_raw_ratio=true"], "pair"),
        (["agents.members.gpt2_bpe.frozen=true"], "pair"),
    ],
)
def test_options_run(tmp_path, extra, agents):
    summary, rows = run(tmp_path, "tracking.backend=none", *extra, agents=agents, steps=2)
    agent_rows = [r for r in rows if r["agent"] and "train/reward_mean" in r]
    assert agent_rows and all(math.isfinite(v) for r in agent_rows for v in r.values() if isinstance(v, float))
    if "algorithm.kl_coef=0.01" in extra:
        assert all("train/kl" in r for r in agent_rows)
    if "algorithm.capability_scope=category" in extra:
        assert any("cross/from_gpt2_bpe/omega/add3" in r for r in agent_rows)
    if "agents.members.gpt2_bpe.frozen=true" in extra:
        frozen = [r for r in agent_rows if r["agent"] == "gpt2_bpe"]
        assert frozen and all("train/updates" not in r for r in frozen)  # shares rollouts, never learns
        assert any("cross/from_gpt2_bpe/rows_run" in r for r in agent_rows if r["agent"] == "opt_char")


SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.mark.skipif(not (SHARED_DATA / "math_train.jsonl").is_file(), reason="../shared/data is not present")
def test_math_task_trains_a_step_on_local_jsonl(tmp_path):
    """Task (b): MATH JSONL, the paper's prompt, math-verify rewards in worker processes (tiny agents score 0)."""
    extra = [
        "task=math",
        f"task.data_dir={SHARED_DATA}",
        "task.eval_limit=4",
        "task.max_prompt_tokens=96",
        "tracking.backend=none",
    ]
    for name in ("opt_char", "gpt2_bpe"):
        extra += [f"agents.members.{name}.warm_start.steps=0", f"agents.members.{name}.model.max_positions=160"]
    extra.append("agents.members.gpt2_bpe.tokenizer.vocab_size=160")  # the math alphabet has ~95 characters
    summary, rows = run(tmp_path, *extra, steps=1)
    assert summary["last_step"] == 1
    assert {r["agent"] for r in rows if "train/reward_mean" in r} == {"opt_char", "gpt2_bpe"}


def test_non_finite_updates_are_skipped_then_the_run_aborts(tmp_path, monkeypatch):
    """Fault injection: NaN log-ratios make every update non-finite; steps are skipped, then the run stops."""
    import hacrl_exp.trainer.step as update
    from hacrl_exp.errors import NumericsError

    real = update.sequence_log_ratio
    monkeypatch.setattr(update, "sequence_log_ratio", lambda *a, **k: real(*a, **k) * float("nan"))
    config = preflight(tiny_overrides("pair", steps=5) + ["tracking.backend=none", "trainer.max_bad_steps=2"])
    with pytest.raises(NumericsError, match="2 consecutive steps"):
        train(config, tmp_path)
    rows = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "train/skipped_updates" in r]
    steps = sorted({r["step"] for r in rows})  # a step whose rewards are all equal has only empty updates: not bad
    bad = [s for s in steps if any(r["train/skipped_updates"] > 0 for r in rows if r["step"] == s)]
    assert bad[-2:] == steps[-2:]  # the run stops at its 2nd consecutive bad step, and both are logged
    assert all(r["train/skipped_updates"] == r["train/updates"] - r["train/empty_updates"] for r in rows)


@pytest.mark.skipif(not (SHARED_DATA / "math500.jsonl").is_file(), reason="../shared/data is not present")
def test_training_scores_benchmarks_through_the_evaluation_harness(tmp_path, monkeypatch):
    monkeypatch.setenv("HACRL_DATA_DIR", str(SHARED_DATA))
    extra = ["tracking.backend=none", "trainer.eval_benchmarks=[arithmetic,gsm8k]", "trainer.eval_benchmark_limit=2"]
    summary, rows = run(tmp_path, *extra, steps=1)
    evaluated = [r for r in rows if "eval/gsm8k/accuracy" in r]
    assert {(r["step"], r["agent"]) for r in evaluated} == {(s, a) for s in (0, 1) for a in ("opt_char", "gpt2_bpe")}
    assert all(0 <= r["eval/arithmetic/accuracy"] <= 1 for r in evaluated)


def test_unknown_eval_benchmark_is_a_config_error():
    from hacrl_exp.errors import ConfigError

    with pytest.raises(ConfigError, match="trainer.eval_benchmarks has 'mathh500'"):
        preflight(["trainer.eval_benchmarks=[mathh500]"])


def test_evaluation_hook_stops_the_run_early(tmp_path):
    import mlflow

    seen = []

    def stop_at_two(step, metrics):
        seen.append((step, sorted(metrics)))
        return step >= 2

    config = preflight([*tiny_overrides("pair", steps=6), "trainer.eval_every=1", f"trainer.output_dir={tmp_path}"])
    summary = train(config, tmp_path, on_evaluate=stop_at_two)
    assert seen == [(1, ["gpt2_bpe", "opt_char"]), (2, ["gpt2_bpe", "opt_char"])]
    assert summary["stopped_early"] == 2 and summary["last_step"] == 2
    parent = mlflow.MlflowClient().get_run(summary["run_ids"][""])
    assert parent.data.tags["stopped_early"] == "2" and parent.info.status == "FINISHED"
    assert (tmp_path / "checkpoints").exists()
