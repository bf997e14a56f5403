"""Held-out greedy accuracy of an agent, per task category (the periodic evaluation during training)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from hacrl_exp.agents.agent import Agent
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.tasks.base import Problem, Task


def greedy_accuracy(agent: Agent, task: Task, problems: Sequence[Problem], max_new_tokens: int) -> dict[str, float]:
    """accuracy/<category> = mean reward of greedy answers, plus accuracy/mean over the categories."""
    prompts = [agent.prompt_ids(p.prompt) for p in problems]
    greedy = SamplingSettings(do_sample=False, temperature=0.0, max_new_tokens=max_new_tokens)
    rollouts = agent.engine.generate(prompts, 1, greedy)
    grades = task.grade(rollouts.texts, problems)
    by_category: dict[str, list[float]] = defaultdict(list)
    for problem, grade in zip(problems, grades):
        by_category[problem.category].append(grade.reward)
    metrics = {f"accuracy/{c}": sum(v) / len(v) for c, v in sorted(by_category.items())}
    metrics["accuracy/mean"] = sum(metrics.values()) / len(metrics)
    return metrics
