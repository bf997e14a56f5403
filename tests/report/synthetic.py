"""Hand-made ReportData (no training, no MLflow) with known per-seed and per-problem numbers.

Two agents (strong, weak), seeds 0, 1, 2, two categories (x, y) of PROBLEMS_PER_CATEGORY held-out problems each.
A method's accuracy at a seed is set exactly: the first round(acc · P) problems of each category are right. The
per-seed accuracies below make HACPO − GSPO×2 disagree across seeds for the strong agent (+0.15, +0.15, −0.05):
pooled over 3 × 400 answers that is clearly significant per problem, but the sign-flip p over 3 seeds is 4/8.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hacrl_exp.report.load import HELDOUT, ReportData

PROBLEMS_PER_CATEGORY = 200
CATEGORIES = ("x", "y")
SEEDS = (0, 1, 2)
STEPS = (0, 10, 20)
BASE_ACCURACY = 0.3
ROLLOUTS_PER_STEP = {"GSPO": 64, "GSPO×2": 128, "Naive": 64, "HACPO": 64, "HACPO −ω": 64}
ACCURACY = {  # (agent, method) -> final accuracy at seeds 0, 1, 2 (both categories)
    ("strong", "GSPO"): (0.50, 0.50, 0.50),
    ("strong", "GSPO×2"): (0.50, 0.50, 0.60),
    ("strong", "Naive"): (0.55, 0.52, 0.58),
    ("strong", "HACPO"): (0.65, 0.65, 0.55),
    ("strong", "HACPO −ω"): (0.60, 0.61, 0.50),
    ("weak", "GSPO"): (0.40, 0.42, 0.41),
    ("weak", "GSPO×2"): (0.41, 0.43, 0.40),
    ("weak", "Naive"): (0.40, 0.40, 0.40),
    ("weak", "HACPO"): (0.41, 0.42, 0.41),
    ("weak", "HACPO −ω"): (0.40, 0.40, 0.42),
}
SHARING = ("Naive", "HACPO", "HACPO −ω")
"""Methods that log the mechanism metrics; HACPO −ω logs no in-window share here, to test a missing key."""


def make_data() -> ReportData:
    runs, curves, problems = [], [], []
    for (agent, method), accuracies in ACCURACY.items():
        for seed, final in zip(SEEDS, accuracies):
            run_id = f"{agent}-{method}-{seed}"
            runs.append(
                {"run_id": run_id, "parent_id": f"p-{method}-{seed}", "run_name": f"{method}-{seed}",
                 "experiment_id": "1", "agent": agent, "seed": seed, "algorithm": method.lower(),
                 "task": "arithmetic", "method": method, "steps": STEPS[-1]}
            )  # fmt: skip
            for step in STEPS:
                accuracy = BASE_ACCURACY + (final - BASE_ACCURACY) * step / STEPS[-1]
                for category in (*CATEGORIES, "mean"):
                    curves.append((run_id, step, f"eval/accuracy/{category}", accuracy))
                curves.append((run_id, step, "rollouts_total", float(ROLLOUTS_PER_STEP[method] * step)))
                curves.append((run_id, step, "tokens_total", float(10 * ROLLOUTS_PER_STEP[method] * step)))
                curves.append((run_id, step, "seconds", float(step)))
                curves.append((run_id, step, "reward/mean", accuracy))
                if method in SHARING and step > 0:
                    curves.append((run_id, step, "cross/omega", 1.0 + 0.01 * seed + 0.001 * step))
                    curves.append((run_id, step, "train/p_hat", accuracy))
                    if method != "HACPO −ω":
                        curves.append((run_id, step, "cross/in_window_share", 0.5 + 0.01 * seed))
            right = round(final * PROBLEMS_PER_CATEGORY)
            for category in CATEGORIES:
                for i in range(PROBLEMS_PER_CATEGORY):
                    problems.append((run_id, HELDOUT, STEPS[-1], f"{category}{i}", category, float(i < right)))
    curves = pd.DataFrame(curves, columns=["run_id", "step", "metric", "value"])
    problems = pd.DataFrame(problems, columns=["run_id", "benchmark", "step", "problem_id", "category", "score"])
    return ReportData(pd.DataFrame(runs), curves, problems)


def per_seed_differences(agent: str, a: str, b: str) -> np.ndarray:
    return np.array(ACCURACY[(agent, a)]) - np.array(ACCURACY[(agent, b)])
