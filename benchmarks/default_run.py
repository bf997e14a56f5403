"""The default run end to end: wall time (warm start and evaluation included), peak RSS, and learning.

    python -m benchmarks.default_run [--reuse-cache] [extra overrides...]

Runs `python -m hacrl_exp.run` in a child process with a fresh warm-start cache (unless --reuse-cache),
then prints wall seconds, the child's peak RSS, and each agent's held-out accuracy at step 0 and at the end.
Targets (issue 3): ≤ 5 minutes on 2 cores, peak RSS ≤ 2 GB, both agents' accuracy rises.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import print_table, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reuse-cache", action="store_true", help="keep the warm-start cache between runs")
    parser.add_argument("--out", default="benchmarks/results/default_run.json")
    args, overrides = parser.parse_known_args()
    work = Path(tempfile.mkdtemp(prefix="hacrl_default_"))
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{work / 'mlflow.db'}")
    if not args.reuse_cache:
        env["HACRL_CACHE_DIR"] = str(work / "cache")
    command = [sys.executable, "-m", "hacrl_exp.run", f"hydra.run.dir={work / 'run'}", *overrides]
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True)
    wall = time.perf_counter() - started
    peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2  # ru_maxrss is in KiB on Linux
    summary = json.loads((work / "run" / "summary.json").read_text())
    evals = summary["evals"]
    first, last = evals[min(evals, key=int)], evals[max(evals, key=int)]
    rows = [
        [
            name,
            first[name]["accuracy/mean"],
            last[name]["accuracy/mean"],
            last[name]["accuracy/mean"] - first[name]["accuracy/mean"],
        ]
        for name in first
    ]
    print_table(
        ["agent", "held-out acc. step 0", f"step {max(evals, key=int)}", "change"],
        rows,
        "Default run: held-out greedy accuracy (mean over tiers)",
    )
    print_table(
        ["wall s (incl. warm start, eval)", "s/step (RL)", "peak RSS GB"],
        [[wall, summary["seconds_per_step"], peak_gb]],
        "Default run: cost",
    )
    write_json(args.out, {"wall_s": wall, "peak_rss_gb": peak_gb, "summary": summary, "overrides": overrides})


if __name__ == "__main__":
    main()
