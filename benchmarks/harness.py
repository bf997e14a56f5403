"""Shared machinery of the benchmark suite: configs, per-step and per-agent phase times of trainer runs, RSS and load.

Runs go through the trainer's front door (`hacrl_exp.trainer.loop.train`, executor=local), and every number of a
run comes from what the loop itself logs to the run's metrics.jsonl (docs/metrics.md): per step, the job row's
`time/<phase>_s`, `time/step_s`, `time/other_s` and `cost/process_seconds` (the job's CPU seconds so far), and each
agent's row with its own `time/<phase>_s`, `train/rollouts_total`, `train/tokens_total`, `cost/trained_rows`,
`train/updates`, `train/rows_run_share` and `cost/process_seconds`. Nothing in the package is wrapped or replaced.
On a machine shared with other jobs, CPU seconds move much less than wall seconds, so ratios of both are reported.

`StepWatcher` follows a run while it trains (a thread that tails metrics.jsonl; `STEP_FLUSH` makes the loop write
it every step) for what only the process can tell: its RSS at the end of each step.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from hacrl_exp.config.preflight import CONFIG_DIR
from hacrl_exp.config.schema import Config
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import read_metrics
from hacrl_exp.trainer.validate import validate

BENCH_CONF = Path(__file__).resolve().parent / "conf"
"""Benchmark-only presets (agents=four_way), found through Hydra's search path."""

RESULTS = Path(os.environ.get("HACRL_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
"""Where benchmarks write JSON and tables; $HACRL_BENCH_RESULTS moves it (benchmarks.smoke: a temporary folder)."""

BASE_OVERRIDES = [
    "tracking.backend=none",
    "trainer.progress=false",
    "trainer.eval_limit=1",  # the step-0 and final evaluations are outside the timed steps; keep them short
    "trainer.eval_every=0",
    "trainer.threads=1",
]
PHASES = ("generate", "reward", "score_own", "build_batch", "update")
"""The loop's `time/<phase>_s` (docs/metrics.md): each agent's source phases, then its learner phases."""
STEP_FLUSH = ["trainer.checkpoint_every=0", "tracking.flush_every=1"]
"""Overrides that make the loop write metrics.jsonl at the end of every step (for `StepWatcher`)."""


def bench_config(overrides: Iterable[str]) -> Config:
    """The validated Config for these overrides, with benchmarks/conf on Hydra's search path."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[f"hydra.searchpath=[file://{BENCH_CONF}]", *overrides])
    finally:
        GlobalHydra.instance().clear()
    return validate(cfg)


def rss_mb() -> float:
    """Resident set size of this process now (VmRSS), MiB."""
    return _proc_status("VmRSS")


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (VmHWM), MiB."""
    return _proc_status("VmHWM")


def _proc_status(field: str) -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"/proc/self/status has no {field}")


def machine() -> dict:
    """What the numbers were measured on: cores, load average at the start, library versions."""
    import transformers

    return {
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def step_records(rows: list[dict]) -> list[dict]:
    """One record per training step from a new run's metrics.jsonl rows (`read_metrics`):
    {'step', 'total', 'other', <phase>: s (sum over agents), 'cpu': the job's CPU s since the previous step's row
    (NaN for the first step, whose count starts before warm starts and the step-0 evaluation),
    'agents': {name: {<phase>: s, 'rollouts', 'tokens', 'rows' (trained rows), 'cpu' (its rollout and learn calls),
    'updates', 'rows_run_share'}}}. Cumulative counters become per-step differences."""
    jobs = {r["step"]: r for r in rows if r["agent"] == "" and "time/step_s" in r}
    agents: dict[int, dict[str, dict]] = {}
    for row in rows:
        if row["agent"] and "time/generate_s" in row:
            agents.setdefault(row["step"], {})[row["agent"]] = row
    records, before, cpu_before = [], {}, math.nan
    for step in sorted(jobs):
        job = jobs[step]
        record = {"step": step, "total": job["time/step_s"], "other": job["time/other_s"]}
        record.update({p: job[f"time/{p}_s"] for p in PHASES})
        cpu = job.get("cost/process_seconds", math.nan)
        record["cpu"], cpu_before = cpu - cpu_before, cpu
        record["agents"] = {}
        for name, row in agents.get(step, {}).items():
            last = before.get(name, {})
            totals = {
                "rollouts": row["train/rollouts_total"],
                "tokens": row["train/tokens_total"],
                "rows": row.get("cost/trained_rows", 0.0),
                "cpu": row.get("cost/process_seconds", math.nan),
            }
            agent = {p: row[f"time/{p}_s"] for p in PHASES if f"time/{p}_s" in row}
            agent.update({k: v - last.get(k, 0.0) for k, v in totals.items()})
            if "train/updates" in row:  # learners only
                agent.update(updates=row["train/updates"], rows_run_share=row["train/rows_run_share"])
            record["agents"][name], before[name] = agent, totals
        records.append(record)
    return records


def run_training(overrides: list[str], steps: int, out_dir: Path) -> list[dict]:
    """Train for `steps` steps through the public `train` and return the run's `step_records`."""
    train(bench_config([*BASE_OVERRIDES, f"trainer.steps={steps}", *overrides]), out_dir)
    return step_records(read_metrics(out_dir / "metrics.jsonl"))


class Poller:
    """A context manager around a run: a background thread calls `_poll` every `interval` s, and once more on exit."""

    def __init__(self, interval: float) -> None:
        self.interval, self._stop = interval, threading.Event()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._poll()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._poll()

    def _poll(self) -> None:
        raise NotImplementedError


class StepWatcher(Poller):
    """Calls on_step(step) from a background thread soon after each training step's job row reaches the run's
    metrics.jsonl (polled every `interval` s). Run with `STEP_FLUSH`, else the loop writes the file only every
    tracking.flush_every steps or at checkpoints. A context manager around `train`: the last rows are read on exit.
    """

    def __init__(self, metrics: Path, on_step: Callable[[int], None], interval: float = 0.005) -> None:
        super().__init__(interval)
        self.metrics, self.on_step, self._offset = Path(metrics), on_step, 0

    def _poll(self) -> None:
        try:
            if self.metrics.stat().st_size == self._offset:
                return
            with open(self.metrics, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written is read at the next poll
        self._offset += len(complete)
        for line in complete.decode().splitlines():
            row = json.loads(line)
            if row["agent"] == "" and "time/step_s" in row:
                self.on_step(row["step"])


def measure(
    configs: dict[str, list[str]], steps: int, repeats: int, work: Path, warmup: bool = True, log=print
) -> dict[str, list[dict]]:
    """Run every config `repeats` times, interleaved (so machine noise hits all alike), dropping each run's
    first step; with `warmup`, one 2-step run of the first config comes first and is discarded."""
    if warmup:
        first = next(iter(configs))
        run_training(configs[first], 2, work / "warmup")
    kept: dict[str, list[dict]] = {label: [] for label in configs}
    for repeat in range(repeats):
        for label, overrides in configs.items():
            started = time.perf_counter()
            records = run_training(overrides, steps, work / f"{_slug(label)}_{repeat}")
            kept[label] += records[1:]
            step = statistics.median(r["total"] for r in records[1:])
            log(f"  [{label}] repeat {repeat + 1}/{repeats}: {step:.3f} s/step ({time.perf_counter() - started:.0f} s)")
    return kept


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in label)


def median(values: Iterable[float]) -> float:
    """Median of the values that are not NaN (a first step's CPU seconds); NaN when none is."""
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else float("nan")


def summarize(records: list[dict]) -> dict:
    """Medians over steps: step total, each phase, 'other', and per agent each field of its record."""
    out = {"steps": len(records), "total": median(r["total"] for r in records)}
    out["cpu"] = median(r["cpu"] for r in records)
    out.update({p: median(r[p] for r in records) for p in (*PHASES, "other")})
    agents: dict[str, dict[str, float]] = {}
    for name in records[0]["agents"] if records else []:
        keys = {k for r in records for k in r["agents"].get(name, {})}
        agents[name] = {k: median(r["agents"][name][k] for r in records if k in r["agents"][name]) for k in keys}
    out["agents"] = agents
    return out
