"""The numbers behind docs/reliability.md: a long run's memory and disk, hostile outputs graded, and a run killed
five times then resumed, compared with the uninterrupted run.

    python -m benchmarks.reliability [--steps 500] [--skip long_run hostile crash] [overrides of the long run...]

  long_run  the tiny pair (hacrl_exp.config.presets) trains --steps HACPO steps with MLflow, a checkpoint every
            50 steps and keep_checkpoints=2: RSS at the end of every step (growth = median of the last 50 steps −
            median of steps 51–100, as benchmarks.memory), the checkpoints folder after each checkpoint, bytes per
            step of metrics.jsonl and of the MLflow store. Measured from outside the loop (`RunWatcher`, a thread):
            RSS sampled every 20 ms and assigned to steps by the MLflow timestamps of the parent run's
            `time/step_s` (logged as each step ends); the checkpoints folder as it stands once rotation is done.
  hostile   each output of hacrl_exp/rewards/hostile.py graded alone (task.grader_timeout_s = 5 s): reason,
            seconds, whether the worker was replaced; then the grader's processes and the parent's RSS.
  crash     hacrl_exp/crash_drill.py's five kills and resumes (tests/reliability/test_crash_resume.py asserts
            on the same drill), and the largest difference from the uninterrupted run in metrics.jsonl and MLflow.
"""

from __future__ import annotations

import argparse
import bisect
import os
import statistics
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.common import print_table, write_json
from benchmarks.harness import RESULTS, Poller, machine, rss_mb

MIB = 2**20
CHECKPOINT_EVERY, KEEP = 50, 2


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


class RunWatcher(Poller):
    """A thread that follows a training run from outside: this process's RSS every `interval` s as (time.time(),
    MiB), and per checkpoint step the checkpoints folder's names and bytes as it stands once published and rotated
    (the last listing seen while `latest` names that step, the newest step folder, and no temporary folder is
    being written)."""

    def __init__(self, run: Path, interval: float = 0.02) -> None:
        super().__init__(interval)
        self.root = run / "checkpoints"
        self.samples: list[tuple[float, float]] = []
        self.checkpoints: dict[int, tuple[list[str], int]] = {}

    def _poll(self) -> None:
        self.samples.append((time.time(), rss_mb()))
        try:
            latest = (self.root / "latest").read_text().strip()
            names = sorted(p.name for p in self.root.iterdir())
            steps = [n for n in names if n.startswith("step_")]
            # published and pointed at: no temporary folder, and `latest` names the newest step folder
            if steps and steps[-1] == latest and not any(n.startswith(".tmp_") for n in names):
                step = int(latest.removeprefix("step_"))
                if self.checkpoints.get(step, ([], 0))[0] != names:
                    self.checkpoints[step] = (names, folder_bytes(self.root))
        except (OSError, ValueError):  # no checkpoint yet, or a folder removed while read: the next poll sees it
            pass

    def rss_at(self, timestamps_ms: dict[int, int]) -> dict[int, float]:
        """{step: RSS of the last sample taken by each step's timestamp (ms since the epoch)}."""
        times = [t for t, _ in self.samples]
        out = {}
        for step, ms in sorted(timestamps_ms.items()):
            i = bisect.bisect_right(times, ms / 1000 + 1e-3) - 1  # MLflow truncates to the millisecond
            out[step] = self.samples[max(i, 0)][1]
        return out


def step_end_times(store: str, parent_run_id: str) -> dict[int, int]:
    """{step: MLflow timestamp (ms) of the parent run's time/step_s}: the loop logs it as the step ends."""
    from mlflow.tracking import MlflowClient

    return {m.step: m.timestamp for m in MlflowClient(store).get_metric_history(parent_run_id, "time/step_s")}


def long_run(steps: int, work: Path, overrides: list[str] = ()) -> dict:
    from hacrl_exp.config.presets import tiny_overrides
    from hacrl_exp.trainer.loop import train
    from hacrl_exp.trainer.validate import preflight

    store = f"sqlite:///{work / 'mlflow.db'}"
    work.mkdir(parents=True, exist_ok=True)  # the MLflow store's folder must exist (the run checks it)
    checkpoints = [f"trainer.checkpoint_every={CHECKPOINT_EVERY}", f"trainer.keep_checkpoints={KEEP}"]
    config = preflight(
        [*tiny_overrides("pair", steps), *checkpoints, "trainer.eval_every=0", f"tracking.uri={store}", *overrides]
    )
    started = time.perf_counter()
    with RunWatcher(work / "run") as watcher:
        summary = train(config, work / "run")
    rss = watcher.rss_at(step_end_times(store, summary["run_ids"][""]))
    series = [rss[s] for s in sorted(rss)]
    early, late = statistics.median(series[50:100] or series), statistics.median(series[-50:])  # short runs: all
    return {
        "steps": steps,
        "seconds": time.perf_counter() - started,
        "rss_first_mb": series[0],
        "rss_early_mb": early,
        "rss_late_mb": late,
        "rss_growth_mb": late - early,
        "rss_max_mb": max(series),
        "checkpoints": [
            {"step": step, "folders": sum(n.startswith("step_") for n in names), "mib": size / MIB}
            for step, (names, size) in sorted(watcher.checkpoints.items())
        ],
        "metrics_bytes_per_step": (work / "run" / "metrics.jsonl").stat().st_size / steps,
        "mlflow_bytes_per_step": (work / "mlflow.db").stat().st_size / steps,
    }


def hostile() -> dict:
    from hacrl_exp.rewards import Grader
    from hacrl_exp.rewards.hostile import GOLD, HOSTILE

    me = psutil.Process()
    baseline, rss_before = {p.pid for p in me.children()}, me.memory_info().rss / MIB
    rows = []
    with Grader(timeout_s=5.0) as grader:
        for name, (response, _) in HOSTILE.items():
            grader.start()
            workers = grader.worker_pids
            started = time.monotonic()
            (grade,) = grader.grade([response], [GOLD])
            seconds = time.monotonic() - started
            rows.append(
                {
                    "output": name,
                    "chars": len(response),
                    "reward": grade.reward,
                    "reason": grade.reason,
                    "seconds": seconds,
                    "worker_replaced": not grader.worker_pids & workers,
                    "worker_rss_mb": max(
                        (psutil.Process(p).memory_info().rss / MIB for p in grader.worker_pids), default=0
                    ),
                }
            )
    leftover = (
        {p.pid for p in me.children()}
        - baseline
        - {p.pid for p in me.children() if "resource_tracker" in " ".join(p.cmdline())}
    )
    return {
        "outputs": rows,
        "leftover_processes": len(leftover),
        "parent_rss_growth_mb": me.memory_info().rss / MIB - rss_before,
    }


def crash(work: Path) -> dict:
    from hacrl_exp.crash_drill import deterministic, kill_five_times, mlflow_histories, resume_to_the_end, uninterrupted
    from hacrl_exp.trainer.metrics import read_metrics

    store = f"sqlite:///{work / 'mlflow.db'}"
    cache = os.environ.get("HACRL_CACHE_DIR", str(Path.home() / ".cache" / "hacrl_exp"))
    env = {**os.environ, "HACRL_CACHE_DIR": cache}
    _, ref_rows, ref_mlflow = uninterrupted(work / "reference", store, env)
    kills = kill_five_times(work / "run", store, env)
    resume_to_the_end(work / "run", store, env)
    got, want = deterministic(read_metrics(work / "run" / "metrics.jsonl")), deterministic(ref_rows)
    crashed = mlflow_histories(store, "crashed")
    mlflow_diff, duplicated = 0.0, 0
    for name, ref_run in ref_mlflow.items():
        for key, history in ref_run["metrics"].items():
            mine = crashed[name]["metrics"].get(key, [])
            duplicated += len(mine) - len({s for s, _ in mine})
            mlflow_diff = max([mlflow_diff, *(abs(a[1] - b[1]) for a, b in zip(mine, history))])
    return {
        "kills": kills,
        "same_metric_keys": got.keys() == want.keys(),
        "max_abs_diff_metrics_jsonl": max(abs(got[k] - v) for k, v in want.items()),
        "max_abs_diff_mlflow": mlflow_diff,
        "mlflow_runs": len(crashed),
        "mlflow_statuses": sorted({r["status"] for r in crashed.values()}),
        "mlflow_duplicated_steps": duplicated,
        "checkpoints_at_end": sorted(p.name for p in (work / "run" / "checkpoints").iterdir()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--skip", nargs="*", default=[], choices=["long_run", "hostile", "crash"])
    parser.add_argument("--out", default=str(RESULTS / "reliability.json"))
    args, overrides = parser.parse_known_args()  # trailing key=value: Hydra overrides of the long run
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(tempfile.mkdtemp(prefix="hacrl_reliability_"))
    result: dict = {"machine": machine()}
    print(f"machine: {result['machine']}")
    if "long_run" not in args.skip:
        r = result["long_run"] = long_run(args.steps, work / "long_run", overrides)
        print_table(
            ["steps", "s", "RSS after step 1", "median 51–100", "median last 50", "growth MiB", "max MiB"],
            [
                [
                    r["steps"],
                    r["seconds"],
                    r["rss_first_mb"],
                    r["rss_early_mb"],
                    r["rss_late_mb"],
                    r["rss_growth_mb"],
                    r["rss_max_mb"],
                ]
            ],
            "RSS over a long run (tiny pair, MiB)",
        )
        print_table(
            ["after step", "step folders", "checkpoints MiB"],
            [[c["step"], c["folders"], c["mib"]] for c in r["checkpoints"]],
            f"Checkpoints folder (keep_checkpoints=2); metrics.jsonl {r['metrics_bytes_per_step']:.0f} B/step, "
            f"MLflow store {r['mlflow_bytes_per_step']:.0f} B/step",
        )
    if "hostile" not in args.skip:
        r = result["hostile"] = hostile()
        print_table(
            ["output", "chars", "reward", "reason", "s", "worker replaced", "worker RSS MiB"],
            [list(o.values()) for o in r["outputs"]],
            f"Hostile outputs (timeout 5 s); leftover processes {r['leftover_processes']}, "
            f"parent RSS growth {r['parent_rss_growth_mb']:.1f} MiB",
        )
    if "crash" not in args.skip:
        r = result["crash"] = crash(work / "crash")
        print_table(
            ["fault", "exit", "resumes from step", "leftover temp folders", "s"],
            [
                [k["fault"], k["exit"], k["resumes_from"], " ".join(k["leftover"]) or "-", k["seconds"]]
                for k in r["kills"]
            ],
            "Kills (each process resumes from the previous one's last checkpoint)",
        )
        print(
            f"\nafter the last resume: max |Δ| metrics.jsonl {r['max_abs_diff_metrics_jsonl']:.3g}, MLflow "
            f"{r['max_abs_diff_mlflow']:.3g}; {r['mlflow_runs']} MLflow runs {r['mlflow_statuses']}, "
            f"{r['mlflow_duplicated_steps']} duplicated steps; checkpoints {r['checkpoints_at_end']}"
        )
    write_json(args.out, result)


if __name__ == "__main__":
    main()
