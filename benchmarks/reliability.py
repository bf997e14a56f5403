"""The numbers behind docs/reliability.md: a long run's memory and disk, hostile outputs graded, and a run killed
five times then resumed, compared with the uninterrupted run.

    python -m benchmarks.reliability [--steps 500] [--skip long_run hostile crash] [overrides of the long run...]

  long_run  the tiny pair of tests/e2e trains --steps HACPO steps with MLflow, a checkpoint every 50 steps and
            keep_checkpoints=2: RSS at the start of every step (growth = median of the last 50 steps − median of
            steps 51–100, as benchmarks.memory), the checkpoints folder after each checkpoint, bytes per step of
            metrics.jsonl and of the MLflow store.
  hostile   each output of tests/reliability/test_hostile_outputs.py graded alone (task.grader_timeout_s = 5 s):
            reason, seconds, whether the worker was replaced; then the grader's processes and the parent's RSS.
  crash     tests/reliability/test_crash_resume.py's five kills and resumes, and the largest difference from
            the uninterrupted run in metrics.jsonl and in MLflow.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.common import print_table, write_json
from benchmarks.harness import RESULTS, machine

MIB = 2**20


def long_run(steps: int, work: Path, overrides: list[str] = ()) -> dict:
    import pytest

    from tests.reliability.test_resources import long_run as run

    store = work / "mlflow.db"
    work.mkdir(parents=True, exist_ok=True)  # the MLflow store's folder must exist (the run checks it)
    started = time.perf_counter()
    with pytest.MonkeyPatch.context() as mp:
        rss, checkpoints = run(mp, work / "run", steps, 50, 2, f"tracking.uri=sqlite:///{store}", *overrides)
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
            for step, names, size in checkpoints
        ],
        "metrics_bytes_per_step": (work / "run" / "metrics.jsonl").stat().st_size / steps,
        "mlflow_bytes_per_step": store.stat().st_size / steps,
    }


def hostile() -> dict:
    from hacrl_exp.rewards import Grader
    from tests.reliability.test_hostile_outputs import GOLD, HOSTILE, grader_children

    me = psutil.Process()
    baseline, rss_before = {p.pid for p in me.children()}, me.memory_info().rss / MIB
    rows = []
    with Grader(timeout_s=5.0) as grader:
        for name, (response, _) in HOSTILE.items():
            grader.start()
            workers = grader_children()
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
                    "worker_replaced": not grader_children() & workers,
                    "worker_rss_mb": max(
                        (psutil.Process(p).memory_info().rss / MIB for p in grader_children()), default=0
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
    from hacrl_exp.trainer.metrics import read_metrics
    from tests.reliability.test_crash_resume import (
        deterministic,
        kill_five_times,
        mlflow_histories,
        resume_to_the_end,
        uninterrupted,
    )

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
            ["steps", "s", "RSS step 1", "median 51–100", "median last 50", "growth MiB", "max MiB"],
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
