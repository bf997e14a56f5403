"""Metric rows of a run: a tidy `metrics.jsonl` (step, agent, metric → value) mirrored into MLflow."""

from __future__ import annotations

import json
from pathlib import Path

from hacrl_exp.algo import CapabilityTracker


class MetricsLog:
    """Buffers rows and writes them at `flush`, together with the tracker, so both stay in step.

    truncate_after: on resume, drop rows logged after the checkpoint step by the interrupted run.
    """

    def __init__(self, path: Path, truncate_after: int | None = None) -> None:
        self.path, self.rows = path, []
        if truncate_after is not None and path.exists():
            kept = [line for line in path.read_text().splitlines() if json.loads(line)["step"] <= truncate_after]
            path.write_text("".join(line + "\n" for line in kept))

    def add(self, step: int, metrics: dict[str, float], agent: str | None, tracker) -> None:
        self.rows.append({"step": step, "agent": agent or "", **metrics})
        tracker.log(step, metrics, agent)

    def flush(self, tracker) -> None:
        with open(self.path, "a") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in self.rows)
        self.rows = []
        tracker.flush()


def read_metrics(path: Path) -> list[dict]:
    """All rows of a metrics.jsonl file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def capability_metrics(
    agent: int,
    names: list[str],
    capability: CapabilityTracker,
    by_category: dict[str, CapabilityTracker],
    category_accuracy: dict[str, list[float]],
    scope: str = "batch",
) -> dict[str, float]:
    """P̂, ω = ρ(j→k) and baseline weights of one agent, overall and per category (logged in either scope)."""
    rho = capability.loss_weights()
    metrics = {"capability/p_hat": float(capability.p_hat()[agent])}
    for j, source in enumerate(names):
        if j != agent:
            metrics[f"omega/{source}"] = float(rho[agent, j])
            metrics[f"baseline_weight/{source}"] = float(1.0 / rho[agent, j])
    for category, tracker in by_category.items():
        metrics[f"capability/{category}/p_hat"] = float(tracker.p_hat()[agent])
        if scope == "category":  # the ω actually used for this category's prompts
            for j, source in enumerate(names):
                if j != agent:
                    metrics[f"capability/{category}/omega/{source}"] = float(tracker.loss_weights()[agent, j])
        if category in category_accuracy:
            metrics[f"capability/{category}/accuracy"] = category_accuracy[category][agent]
    return metrics


def progress_text(names: list[str], pool: dict, capability: CapabilityTracker, step_time: float) -> str:
    """One line for the progress bar: each agent's reward and P̂, and the step time."""
    p_hat = capability.p_hat()
    parts = [f"{n}: r={float(pool[i].rewards.mean()):.2f} P̂={float(p_hat[i]):.2f}" for i, n in enumerate(names)]
    return " | ".join(parts) + f" | {step_time:.2f}s/step"
