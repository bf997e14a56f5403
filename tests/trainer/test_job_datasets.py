"""The data a job reads is named as MLflow datasets: held-out set, a fixed training set, every eval benchmark."""

import json

from hacrl_exp.tasks import build_task
from hacrl_exp.tracking.provenance import problems_dataset
from hacrl_exp.trainer.runstate import job_datasets
from hacrl_exp.trainer.validate import preflight


def mlflow_datasets(config, task, eval_set):
    """job_datasets as open_job logs them: (MLflow dataset, context)."""
    return [
        (problems_dataset(name, rows, source), ctx) for name, rows, source, ctx in job_datasets(config, task, eval_set)
    ]


def test_a_generated_task_names_its_generator_and_each_benchmark():
    config = preflight(["trainer.eval_benchmarks=[arithmetic]", "trainer.eval_benchmark_limit=3"])
    task = build_task(config.task)
    eval_set = task.eval_problems()[:5]
    datasets = mlflow_datasets(config, task, eval_set)
    assert [(d.name, context) for d, context in datasets] == [
        ("arithmetic/eval", "eval"),
        ("benchmark/arithmetic", "benchmark"),
    ]
    eval_data, _ = datasets[0]
    assert "task.seed 0" in eval_data.source.to_dict()["uri"] and len(eval_data.df) == 5
    assert len(datasets[1][0].df) == 3
    assert mlflow_datasets(config, task, eval_set)[0][0].digest == eval_data.digest  # a pure function of the rows


def test_a_math_task_names_its_train_and_eval_files(tmp_path):
    rows = [{"id": f"p{i}", "problem": f"What is {i}+{i}?", "answer": str(2 * i), "type": "Algebra"} for i in range(4)]
    for name in ("train.jsonl", "test.jsonl"):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    overrides = ["task=math", f"task.data_dir={tmp_path}", "task.train_file=train.jsonl", "task.eval_file=test.jsonl"]
    config = preflight([*overrides, "agents.members.gpt2_bpe.tokenizer.vocab_size=160"])
    task = build_task(config.task)
    datasets = {context: d for d, context in mlflow_datasets(config, task, task.eval_problems())}
    assert datasets["train"].source.to_dict()["uri"].endswith("train.jsonl") and len(datasets["train"].df) == 4
    assert datasets["eval"].source.to_dict()["uri"].endswith("test.jsonl")
