"""Agents as Ray actors vs in the trainer's process: seconds per step and fixed cost.

    python -m benchmarks.ray_executor [--steps 6] [extra overrides...]

Trains the default pair (16 prompts × G 8 per agent) for --steps steps three ways, one after another:
executor=local with 1 and with 2 torch threads, and executor=ray with one actor per agent (1 CPU and 1 thread
each), through the public `train`. Prints the median seconds per step (the runs' `time/step_s`, first step
dropped) and the fixed cost of a run (wall time of train() minus its steps: building the agents, the two
evaluations, and for Ray its start, actors and shutdown).

Not measured any more: the pickled bytes of every executor call's arguments and results per step (what Ray moves
between the driver and the actors). It needed LocalExecutor.call wrapped at run time, and the loop logs no byte
counts; docs/distributed.md keeps the last measurement.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.common import median, print_table, write_json
from benchmarks.harness import machine
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import read_metrics
from hacrl_exp.trainer.validate import preflight

MODES = {
    "local, 1 thread": ["executor=local", "trainer.threads=1"],
    "local, 2 threads": ["executor=local", "trainer.threads=2"],
    "ray, 2 actors × 1 thread": ["executor=ray", "executor.cpus_per_agent=1", "trainer.threads=1"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--out", default="benchmarks/results/ray_executor.json")
    parser.add_argument("--smoke", action="store_true", help="the local 1-thread mode only (no Ray start; seconds)")
    args, overrides = parser.parse_known_args()
    modes = {k: v for k, v in MODES.items() if k == "local, 1 thread"} if args.smoke else MODES
    work = Path(tempfile.mkdtemp(prefix="hacrl_ray_"))
    base = [f"trainer.steps={args.steps}", "tracking.backend=none", "trainer.eval_limit=8", "trainer.progress=false"]
    results = {}
    for label, mode in modes.items():
        run_dir = work / label.split(",")[0].replace(" ", "_") / mode[-1].split("=")[1]
        config = preflight([*base, *mode, *overrides])
        started = time.perf_counter()
        train(config, run_dir)
        total = time.perf_counter() - started
        steps = [r["time/step_s"] for r in read_metrics(run_dir / "metrics.jsonl") if "time/step_s" in r]
        results[label] = {"s_per_step": median(steps[1:]), "fixed_s": total - sum(steps), "steps": steps}
    reference = results["local, 1 thread"]["s_per_step"]
    rows = [[label, r["s_per_step"], r["s_per_step"] / reference, r["fixed_s"]] for label, r in results.items()]
    print_table(["executor", "s/step (median)", "× local 1 thread", "fixed s per run"], rows, "Seconds")
    write_json(args.out, {"machine": machine(), "results": results})


if __name__ == "__main__":
    main()
