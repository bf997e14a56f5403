"""Periodic evaluation during training: held-out greedy accuracy per task category, and optionally the
benchmarks of evaluation/ through the same code as `python -m hacrl_exp.evaluate`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from hacrl_exp.agents.agent import Agent
from hacrl_exp.rewards.grader import Grade
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.tasks.base import Problem, Task
from hacrl_exp.tasks.math import gold_answer


def greedy_answers(agent: Agent, task: Task, problems: Sequence[Problem], max_new_tokens: int) -> list[dict]:
    """One record per problem of the agent's greedy answer, the columns of `python -m hacrl_exp.evaluate`'s
    problems.parquet: {id, category, reward, reason, prompt, response, extracted, gold}."""
    prompts = [agent.prompt_ids(p.prompt) for p in problems]
    greedy = SamplingSettings(do_sample=False, temperature=0.0, max_new_tokens=max_new_tokens)
    rollouts = agent.engine.generate(prompts, 1, greedy)
    grades = task.grade(rollouts.texts, problems)
    return [answer_record(p, text, g, task_gold(task, p)) for p, text, g in zip(problems, rollouts.texts, grades)]


def task_gold(task: Task, problem: Problem) -> str:
    """The gold answer the task's grader compares with (the raw answer for reward=verl, hacrl_exp.tasks.math)."""
    compare = getattr(task, "compare", None)
    return gold_answer(problem, compare) if compare else problem.answer


def answer_record(problem: Problem, response: str, grade: Grade, gold: str) -> dict:
    """One graded answer: id, category, reward, reason (the columns paired tests read), then what a reader needs to
    see a failure: the prompt, the response, the extracted answer (None: nothing found) and the gold."""
    return {
        "id": problem.id,
        "category": problem.category,
        "reward": grade.reward,
        "reason": grade.reason,
        "prompt": problem.prompt,
        "response": response,
        "extracted": grade.extracted,
        "gold": gold,
    }


def accuracy_metrics(records: Sequence[dict]) -> dict[str, float]:
    """accuracy/<category> = mean reward per category, plus accuracy/mean = the mean over categories."""
    by_category: dict[str, list[float]] = defaultdict(list)
    for record in records:
        by_category[record["category"]].append(record["reward"])
    metrics = {f"accuracy/{c}": sum(v) / len(v) for c, v in sorted(by_category.items())}
    metrics["accuracy/mean"] = sum(metrics.values()) / len(metrics)
    return metrics


def benchmark_problems(config, source: str = "auto") -> list[tuple[object, list[Problem]]]:
    """Each of trainer.eval_benchmarks as (BenchmarkSpec, problems), loaded as the trainer evaluates them:
    from task.data_dir, the first trainer.eval_benchmark_limit problems."""
    from hacrl_exp.evaluation import load_benchmark
    from hacrl_exp.evaluation.data import load_problems

    specs = [load_benchmark(name) for name in config.trainer.eval_benchmarks]
    limit = config.trainer.eval_benchmark_limit
    return [(spec, load_problems(spec, config.task.data_dir, limit, source)) for spec in specs]


class BenchmarkEvaluation:
    """trainer.eval_benchmarks scored with `hacrl_exp.evaluation.evaluate_agent`; problems load once.

    Sampling inside the harness runs under a forked RNG, so evaluating does not change the training run.
    """

    def __init__(self, config, task: Task) -> None:
        self.names = list(config.trainer.eval_benchmarks)
        if not self.names:
            return
        from hacrl_exp.evaluation import EvalSettings

        self.settings = EvalSettings(
            data_dir=config.task.data_dir,
            limit=config.trainer.eval_benchmark_limit,
            seed=config.seed,
            bootstrap=200,
            grader_forms=config.task.grader_forms,
        )
        self.problems = {spec.name: problems for spec, problems in benchmark_problems(config, self.settings.source)}
        self.grader = getattr(task, "grader", None)  # reuse the math task's running grader workers

    def metrics(self, agent: Agent) -> dict[str, float]:
        """eval/<benchmark>/<metric> (with _ci_low / _ci_high) for one agent; {} when no benchmark is set."""
        if not self.names:
            return {}
        from hacrl_exp.evaluation import evaluate_agent

        result = evaluate_agent(agent, self.names, self.settings, grader=self.grader, problems=self.problems)
        return result.metrics(prefix="eval/")
