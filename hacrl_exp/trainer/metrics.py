"""Metric rows of a run: a tidy `metrics.jsonl` (step, agent, metric → value) mirrored into MLflow."""

from __future__ import annotations

import json
from pathlib import Path

from hacrl_exp.algo import CapabilityTracker
from hacrl_exp.tracking.description import ACCURACY_DECIMALS
from hacrl_exp.trainer.checkpoint import write_text_atomic


class MetricsLog:
    """Buffers rows and writes them at `flush`, together with the tracker, so both stay in step.

    truncate_after: on resume, drop rows logged after the checkpoint step by the interrupted run, and a last line
    cut short by a kill; the file is rewritten atomically, so a crash during the rewrite loses nothing.
    """

    def __init__(self, path: Path, truncate_after: int | None = None) -> None:
        self.path, self.rows = path, []
        if truncate_after is not None and path.exists():
            kept = [line for line in path.read_text().splitlines() if _step_of(line) <= truncate_after]
            write_text_atomic(path, "".join(line + "\n" for line in kept))

    def add(self, step: int, metrics: dict[str, float], agent: str | None, tracker) -> None:
        if not metrics:
            return
        self.rows.append({"step": step, "agent": agent or "", **metrics})
        tracker.log(step, metrics, agent)

    def flush(self, tracker) -> None:
        with open(self.path, "a") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in self.rows)
        self.rows = []
        tracker.flush()

    def replay(self, tracker) -> None:
        """Offer every durable row to the tracker again (on resume): it logs only what its store lacks."""
        if self.path.exists():
            for row in read_metrics(self.path):
                step, agent = row.pop("step"), row.pop("agent")
                tracker.log(step, row, agent or None)
            tracker.flush()


def _step_of(line: str) -> float:
    """The step of a metrics.jsonl line; +inf for a partial line (a write interrupted by a kill)."""
    try:
        return json.loads(line)["step"]
    except (ValueError, KeyError, TypeError):
        return float("inf")


def read_metrics(path: Path) -> list[dict]:
    """All rows of a metrics.jsonl file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def run_history(path: Path) -> tuple[dict[int, dict[str, dict[str, float]]], float, float]:
    """From a run's durable metrics, over every resume: {step: {agent: {accuracy/...: value}}} of its held-out
    evaluations, the mean seconds per training step and the total training seconds."""
    evals: dict[int, dict[str, dict[str, float]]] = {}
    times = []
    for row in read_metrics(path) if Path(path).exists() else []:
        accuracy = {k[len("eval/") :]: v for k, v in row.items() if k.startswith("eval/accuracy/")}
        if accuracy and row["agent"]:
            evals.setdefault(row["step"], {})[row["agent"]] = accuracy
        if "time/step_s" in row or "time/step" in row:  # time/step: runs before the metric keys of docs/metrics.md
            times.append(row.get("time/step_s", row.get("time/step")))
    return dict(sorted(evals.items())), sum(times) / max(len(times), 1), float(sum(times))


def final_metrics(
    history: dict[int, dict[str, dict[str, float]]], counters: dict[str, dict[str, float]], seconds_total: float
) -> dict[str, float]:
    """The parent run's `final/*` summary (docs/metrics.md), so MLflow's runs table compares jobs directly.

    history: {step: {agent: {accuracy/<category>: value, accuracy/mean: value}}} (run_history); an agent's final
    accuracy is its value at the last step it was evaluated, rounded to ACCURACY_DECIMALS (4) decimals: a count
    over a total (averaged over categories) has no more digits worth showing (0.6, not 0.6000000000000001); the
    agent runs' eval/* curves keep the values as computed. counters: {agent: {rollouts_total, tokens_total}}.
        final/accuracy_mean/<agent>, final/accuracy/<category>/<agent>, final/rollouts_total/<agent>,
        final/tokens_total/<agent>, final/time_total_s
    """
    out: dict[str, float] = {}
    for step in sorted(history):  # later steps overwrite earlier ones: each agent's last evaluation wins
        for agent, accuracy in history[step].items():
            for key, value in accuracy.items():
                category = key.split("/", 1)[1]
                name = "final/accuracy_mean" if category == "mean" else f"final/accuracy/{category}"
                out[f"{name}/{agent}"] = round(float(value), ACCURACY_DECIMALS)
    for agent, values in counters.items():
        for key in ("rollouts_total", "tokens_total"):
            if key in values:
                out[f"final/{key}/{agent}"] = float(values[key])
    out["final/time_total_s"] = float(seconds_total)
    return out


def progress_text(names: list[str], pool: dict, capability: CapabilityTracker, step_time: float) -> str:
    """One line for the progress bar: each agent's reward, P̂ and ω from its first partner, and the step time."""
    p_hat, rho = capability.p_hat(), capability.loss_weights()
    parts = []
    for i, name in enumerate(names):
        text = f"{name}: r={float(pool[i].rewards.mean()):.2f} P̂={float(p_hat[i]):.2f}"
        partner = next((j for j in range(len(names)) if j != i), None)
        parts.append(text + (f" ω={float(rho[i, partner]):.2f}" if partner is not None else ""))
    return " | ".join(parts) + f" | {step_time:.2f}s/step"


def is_timing_key(key: str) -> bool:
    """A measured time (`time/*`, or any key in seconds, `*_s`, `*_seconds` such as cost/process_seconds): the one
    kind that differs between two runs of the same config, so comparisons of runs skip it."""
    return key.startswith("time/") or key.endswith(("_s", "_seconds"))
