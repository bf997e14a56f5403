"""Per-step time of HACPO vs GSPO vs GSPO×2 on the default pair, measured side by side in one process.

    python -m benchmarks.step_time [--steps 8] [--repeats 2] [extra overrides...]

Each repeat trains every algorithm for --steps steps from the same warm-started agents (cached), in
turn, so machine noise hits all of them alike. The first step of each run is a warm-up and is dropped.
Prints median seconds per step and per phase (generate / reward / score own / build batch / update /
other) for each algorithm, and the ratios against the issue-3 targets:
  HACPO step ≤ 1.5× a GSPO step at the same per-agent G;  "other" ≤ 10% of a step.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from pathlib import Path

import torch

from benchmarks.common import median, print_table, write_json
from benchmarks.harness import PHASES
from hacrl_exp.trainer.loop import train
from hacrl_exp.trainer.metrics import read_metrics
from hacrl_exp.trainer.validate import preflight

ALGORITHMS = ("gspo", "hacpo", "gspo_x2")


def step_rows(run_dir: Path) -> list[dict]:
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if r["agent"] == "" and "time/step_s" in r]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/results/step_time.json")
    args, overrides = parser.parse_known_args()
    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="hacrl_steps_"))
    times: dict[str, dict[str, list[float]]] = {a: defaultdict(list) for a in ALGORITHMS}
    for repeat in range(args.repeats):
        for algorithm in ALGORITHMS:
            config = preflight(
                [
                    f"algorithm={algorithm}",
                    f"trainer.steps={args.steps}",
                    "tracking.backend=none",
                    "trainer.eval_limit=1",
                    "trainer.progress=false",
                    f"trainer.threads={args.threads}",
                    *overrides,
                ]
            )
            run_dir = work / f"{algorithm}_{repeat}"
            train(config, run_dir)
            for row in step_rows(run_dir)[1:]:
                for key, value in row.items():
                    if key.startswith("time/"):
                        times[algorithm][key[5:].removesuffix("_s")].append(value)
    phases = [*PHASES, "other"]
    rows = []
    for algorithm in ALGORITHMS:
        step = median(times[algorithm]["step"])
        rows.append(
            [algorithm, step, *[median(times[algorithm][p]) for p in phases], median(times[algorithm]["other"]) / step]
        )
    print_table(
        ["algorithm", "s/step", *phases, "other share"],
        rows,
        f"Median seconds per step, pair of tiny agents, {args.threads} thread(s)",
    )
    ratio_gspo = median(times["hacpo"]["step"]) / median(times["gspo"]["step"])
    ratio_x2 = median(times["hacpo"]["step"]) / median(times["gspo_x2"]["step"])
    cross_share = median(times["hacpo"]["build_batch"]) / median(times["hacpo"]["step"])
    print_table(
        ["ratio", "value", "target"],
        [
            ["HACPO / GSPO step (same G per agent)", ratio_gspo, "≤ 1.5"],
            ["HACPO / GSPO×2 step", ratio_x2, "(issue 8: ≤ 0.75 at G = 4)"],
            ["build batch (re-tokenise, advantages) share of a HACPO step", cross_share, "(issue 8: ≤ 0.25)"],
            ["other share of a HACPO step", median(times["hacpo"]["other"]) / median(times["hacpo"]["step"]), "≤ 0.10"],
        ],
        "Ratios",
    )
    write_json(
        args.out,
        {
            "args": vars(args),
            "overrides": overrides,
            "times": {a: dict(t) for a, t in times.items()},
            "hacpo_over_gspo": ratio_gspo,
            "hacpo_over_gspo_x2": ratio_x2,
        },
    )


if __name__ == "__main__":
    main()
