"""Shared machinery of the benchmark suite: configs, per-agent phase timing of trainer runs, RSS and load.

Runs go through the real trainer (`hacrl_exp.trainer.loop.train`, executor=local). `PhaseRecorder` wraps the
three functions each agent worker calls (collect_rollouts, step.build_batch, step.update) for the
duration of a run (each wrapper takes any arguments, reads the ones it needs by name and passes the call on), so
every step is split per agent and per phase without touching the package; the
step totals come from the run's own metrics.jsonl (`time/*_s`). It also reads the process CPU time at the
start and end of every step (the end is the loop's `time/step_s` log call): on a machine shared with other
jobs, CPU seconds move much less than wall seconds, so ratios of both are reported.
"""

from __future__ import annotations

import inspect
import os
import platform
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from hacrl_exp.config.preflight import CONFIG_DIR
from hacrl_exp.config.schema import Config
from hacrl_exp.trainer import loop, step, worker
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
SOURCE_PHASES = ("generate", "reward", "score_own")
LEARNER_PHASES = ("build_batch", "update")
PHASES = (*SOURCE_PHASES, *LEARNER_PHASES)


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


def call_arguments(fn, args: tuple, kwargs: dict) -> dict:
    """{parameter name: value} of a call of `fn`: a wrapper reads the arguments it needs by name and passes the call
    on as it came, so it keeps working when `fn` gains or reorders parameters."""
    return inspect.signature(fn).bind(*args, **kwargs).arguments


class PhaseRecorder:
    """Per-step, per-agent seconds of each phase, plus rollouts/tokens generated and rows trained.

    `steps[i][agent]` holds the record of step i + 1 of the run. Used as a context manager around `train`.
    """

    def __init__(self, on_step_start=None, keep: bool = True) -> None:
        self.keep = keep
        """False: hold only the current step (long runs whose memory is being measured)."""
        self.steps: list[dict[str, dict[str, float]]] = []
        self.cpu: list[float] = []
        """CPU seconds of each step (process time, all threads)."""
        self.on_step_start = on_step_start
        self._originals: dict[str, object] = {}
        self._cpu_start = 0.0
        self._step = 0
        self._names: dict[int, str] = {}

    def __enter__(self) -> PhaseRecorder:
        self._modules = {"collect_rollouts": worker, "build_batch": step, "update": step, "open_job": loop}
        for name, module in self._modules.items():  # in-process workers call these
            self._originals[name] = getattr(module, name)
        worker.collect_rollouts = self._collect
        step.build_batch = self._build
        step.update = self._update
        loop.open_job = self._tracker
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self._originals.items():
            setattr(self._modules[name], name, original)

    def _collect(self, *args, **kwargs):
        named = call_arguments(self._originals["collect_rollouts"], args, kwargs)
        agent, index, times = named["agent"], named["index"], named["times"]
        if index == 0:  # the loop collects agent 0 first: a new step begins
            if self.on_step_start is not None:
                self.on_step_start(self._step + 1)
            self._step += 1
            if not self.keep:
                self.steps.clear()
                self.cpu.clear()
            self.steps.append(defaultdict(dict))
            self._cpu_start = time.process_time()
        self._names[index] = agent.name
        before = dict(times)
        out = self._originals["collect_rollouts"](*args, **kwargs)
        record = self.steps[-1][agent.name]
        for phase in SOURCE_PHASES:
            record[phase] = times[phase] - before[phase]
        record["rollouts"] = float(len(out.texts))
        record["tokens"] = float(sum(len(r) for r in out.response_ids))
        return out

    def _build(self, *args, **kwargs):
        params = call_arguments(self._originals["build_batch"], args, kwargs)["params"]
        started = time.perf_counter()
        batch = self._originals["build_batch"](*args, **kwargs)
        record = self.steps[-1][self._names[params.index]]
        record["build_batch"] = time.perf_counter() - started
        record["rows"] = float(len(batch))
        record["cross_rows"] = float((~batch.is_self).sum())
        record["zero_adv_rows"] = float((batch.advantages == 0).sum())
        return batch

    def _tracker(self, *args, **kwargs):
        tracker = self._originals["open_job"](*args, **kwargs)
        log, recorder = tracker.log, self

        def timed_log(step, metrics, agent=None):
            if agent is None and "time/step_s" in metrics:  # the loop's last act of a step
                recorder.cpu.append(time.process_time() - recorder._cpu_start)
            return log(step, metrics, agent)

        tracker.log = timed_log
        return tracker

    def _update(self, *args, **kwargs):
        agent = call_arguments(self._originals["update"], args, kwargs)["agent"]
        started = time.perf_counter()
        metrics = self._originals["update"](*args, **kwargs)
        record = self.steps[-1][agent.name]
        record["update"] = time.perf_counter() - started
        record["updates"] = metrics.get("train/updates", 0.0)
        return metrics


def run_training(overrides: list[str], steps: int, out_dir: Path, on_step_start=None, keep: bool = True) -> list[dict]:
    """Train for `steps` steps and return one record per step (none with keep=False):
    {'step', 'total', 'cpu', 'other', <phase>: s summed over agents, 'agents': {name: per-agent record}}."""
    config = bench_config([*BASE_OVERRIDES, f"trainer.steps={steps}", *overrides])
    with PhaseRecorder(on_step_start, keep) as recorder:
        loop.train(config, out_dir)
    if not keep:
        return []
    rows = [r for r in read_metrics(out_dir / "metrics.jsonl") if r["agent"] == "" and "time/step_s" in r]
    records = []
    for row, agents, cpu in zip(rows, recorder.steps, recorder.cpu):
        record = {"step": row["step"], "total": row["time/step_s"], "cpu": cpu, "other": row["time/other_s"]}
        record.update({p: row[f"time/{p}_s"] for p in PHASES})
        record["agents"] = {name: dict(values) for name, values in agents.items()}
        records.append(record)
    return records


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
    values = list(values)
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
