"""Grading throughput and grader-pool memory on MATH-500 gold solutions (target: >= 200 answers/s once warm).

    python -m benchmarks.grading [--data-dir ../shared/data] [--repeats 3]

Workloads, each graded by a fresh grader whose workers were started and warmed on 300 other MATH test answers (so
neither the parent's verdict cache nor the workers' parsed-gold cache holds a MATH-500 pair):
  gold/grader       each gold solution's last box vs its answer through `Grader.grade_answers` (answer forms, string
                    and plain-number shortcuts, math-verify for the rest): what training and evaluation do on right
                    answers
  gold/math-verify  the same pairs, every one through the math-verify worker pool (no shortcut)
  shuffled          each box against another problem's answer, every one through math-verify (all wrong: the
                    expensive case, as for a weak model)
Memory: peak summed RSS of the worker processes, sampled every 20 ms (psutil, else /proc).
Run it on an idle machine; with other jobs on the 2 cores the numbers drop several-fold.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

from benchmarks.common import print_table, write_json
from hacrl_exp.evaluation.data import load_problems
from hacrl_exp.evaluation.spec import load_benchmark
from hacrl_exp.rewards import Grade, Grader, canonical
from hacrl_exp.rewards.extract import boxed


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (psutil when installed, else /proc/<pid>/statm); 0 if it is gone."""
    try:
        import psutil

        return psutil.Process(pid).memory_info().rss
    except ImportError:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except Exception:
        return 0


class PeakRSS:
    """Samples the summed RSS of a grader's worker processes in a thread; `peak` in MiB."""

    def __init__(self, grader: Grader, every_s: float = 0.02):
        self.grader, self.every_s, self.peak = grader, every_s, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = list(self.grader.worker_pids)
            self.peak = max(self.peak, sum(rss_bytes(p) for p in pids) / 2**20)
            time.sleep(self.every_s)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def measure(workers: int, harness: bool, answers: list[str], golds: list[str], warm: tuple[list, list]) -> dict:
    """Answers/s of one fresh, warmed grader on (answers, golds); with its pool's peak RSS."""
    grader = Grader(timeout_s=10.0, workers=workers)
    try:
        grader.start()
        with PeakRSS(grader) as rss:
            grader.pool.verify(list(zip(*warm)))  # warm: imports, sympy caches, first-call costs; different pairs
            start = time.perf_counter()
            if harness:
                grades = grader.grade_answers(answers, golds)
            else:
                reasons = grader.pool.verify([(canonical(a), g) for a, g in zip(answers, golds)])
                grades = [Grade(float(r == "correct"), r) for r in reasons]
            seconds = time.perf_counter() - start
        reasons = {r: sum(g.reason == r for g in grades) for r in {g.reason for g in grades}}
        return {"seconds": seconds, "per_s": len(answers) / seconds, "peak_rss_mib": rss.peak, "reasons": reasons}
    finally:
        grader.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("HACRL_DATA_DIR") or "../shared/data")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results/grading.json")
    parser.add_argument("--limit", type=int, default=None, help="the first N problems only (benchmarks.smoke)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="grader pool sizes to measure")
    parser.add_argument("--workloads", nargs="+", default=None, help="a subset of the workloads (default all)")
    args = parser.parse_args()
    math500 = load_problems(load_benchmark("math500"), args.data_dir)
    ids = {p.id for p in math500}
    math500 = math500[: args.limit]
    others = [p for p in load_problems(load_benchmark("math"), args.data_dir) if p.id not in ids][: args.limit or 300]
    warm = ([canonical(boxed(p.solution)) for p in others], [p.answer for p in others])
    boxes, golds = [boxed(p.solution) for p in math500], [p.answer for p in math500]
    shuffled = golds[1:] + golds[:1]
    workloads = {"gold/grader": (True, golds), "gold/math-verify": (False, golds), "shuffled": (False, shuffled)}
    workloads = {k: v for k, v in workloads.items() if args.workloads is None or k in args.workloads}
    rows, results = [], {}
    for name, (harness, targets) in workloads.items():
        for workers in args.workers:
            runs = [measure(workers, harness, boxes, targets, warm) for _ in range(args.repeats)]
            best = max(runs, key=lambda r: r["per_s"])
            median = statistics.median(r["per_s"] for r in runs)
            results[f"{name}/{workers}"] = {"runs": runs, "median_per_s": median}
            rows.append(
                [
                    name,
                    workers,
                    len(boxes),
                    median,
                    best["per_s"],
                    max(r["peak_rss_mib"] for r in runs),
                    " ".join(f"{k}={v}" for k, v in sorted(best["reasons"].items())),
                ]
            )
    print_table(
        ["workload", "workers", "answers", "median answers/s", "best answers/s", "peak pool RSS MiB", "verdicts"],
        rows,
        "Grader throughput on MATH-500 gold solutions (warm)",
    )
    write_json(args.out, {"cpu_count": os.cpu_count(), "load_avg": os.getloadavg(), "results": results})


if __name__ == "__main__":
    main()
