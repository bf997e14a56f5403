"""Metric rows of a run: a tidy `metrics.jsonl` (step, agent, metric → value) mirrored into MLflow."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from hacrl_exp.algo import CapabilityTracker
from hacrl_exp.paths import replace_atomic
from hacrl_exp.tracking.description import ACCURACY_DECIMALS

log = logging.getLogger(__name__)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    replace_atomic(path, lambda tmp: tmp.write_bytes(data))


class MetricsLog:
    """Buffers rows and writes them at `flush`, together with the tracker, so both stay in step.

    truncate_after: on resume, the checkpoint's step; the file is cut back to it (`cut_back`): what it held beyond
    (rows the resumed run logs again, a garbled line, a last line cut short by a kill) is moved aside, never lost.
    """

    def __init__(self, path: Path, truncate_after: int | None = None) -> None:
        self.path, self.rows = path, []
        if truncate_after is not None and path.exists():
            cut_back(path, truncate_after)

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


def cut_back(path: Path, step: int) -> Path | None:
    """Cut metrics.jsonl back to the rows of steps up to `step` (a resume's checkpoint), keeping their bytes as they
    are. Every other line is moved aside into `metrics.jsonl.replaced-<n>` (the next free n), written and fsynced
    before metrics.jsonl is replaced atomically, so at every instant the two files hold at least the original lines:
    rows after the checkpoint (the resumed run logs those steps again), a garbled line (warned, with its line
    numbers), a last line cut short by a kill mid-write (noted: the normal leftover of a crash). Returns the aside file,
    or None when nothing was cut (then nothing is written)."""
    lines = path.read_bytes().split(b"\n")
    ends_cut_short = lines[-1] != b""  # a complete file ends with a newline: its last split is empty
    kept, after, garbled = [], [], []
    for number, line in enumerate(lines[:-1] if not ends_cut_short else lines, start=1):
        row_step = _step_of(line)
        if row_step is None and line.strip():
            garbled.append(number)
        if row_step is not None and row_step <= step:
            kept.append(line)
        elif line.strip():
            after.append(line)
    if not after:
        return None
    aside = _next_aside(path)
    aside.write_bytes(b"".join(line + b"\n" for line in after))
    with open(aside, "rb") as handle:
        os.fsync(handle.fileno())
    write_bytes_atomic(path, b"".join(line + b"\n" for line in kept))
    _report_cut(path, aside, step, len(after) - len(garbled), garbled, len(lines) if ends_cut_short else None)
    return aside


def _step_of(line: bytes) -> int | None:
    """The step of a metrics.jsonl row (a JSON object with a non-negative int step and an agent); None for anything
    else: a line cut short by a kill, or a garbled one."""
    try:
        row = json.loads(line)
    except ValueError:  # UnicodeDecodeError included: non-UTF-8 bytes
        return None
    step = row.get("step") if isinstance(row, dict) else None
    valid = isinstance(step, int) and not isinstance(step, bool) and step >= 0 and isinstance(row.get("agent"), str)
    return step if valid else None


def _next_aside(path: Path) -> Path:
    """metrics.jsonl.replaced-<n>, n one more than any earlier resume's."""
    taken = [int(p.name.rsplit("-", 1)[1]) for p in path.parent.glob(f"{path.name}.replaced-*")
             if p.name.rsplit("-", 1)[1].isdigit()]  # fmt: skip
    return path.with_name(f"{path.name}.replaced-{max(taken, default=0) + 1}")


def _report_cut(path: Path, aside: Path, step: int, later: int, garbled: list[int], cut_short_at: int | None) -> None:
    """One line for what was moved aside: a warning when it holds a garbled line, else a note."""
    short = garbled[-1:] == [cut_short_at]  # the last line, cut short: not a garbled line in the middle
    middle = garbled[:-1] if short else garbled
    parts = [f"{later} rows after checkpoint step {step} (this resume logs them again)"] if later else []
    if middle:
        listed = ", ".join(map(str, middle[:10])) + (" …" if len(middle) > 10 else "")
        parts.append(f"{len(middle)} garbled line(s) (line {listed})")
    if short:
        parts.append(f"a last line cut short (line {cut_short_at}, a write interrupted by a kill)")
    message = f"{path}: moved {' and '.join(parts)} to {aside.name}"
    (log.warning if middle else log.info)(message)


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
