"""Creating a new sqlite MLflow store, side by side: MLflow's own migrations next to a copy of the migrated template.

    python -m benchmarks.new_store [--repeats 10] [--smoke] [--out PATH]

Each repeat opens two new stores (`MlflowClient(uri).search_experiments()`, what a run's first call does), alternating:
one with HACRL_MLFLOW_TEMPLATE=0 (MLflow's ~60 alembic revisions) and one from the template
(hacrl_exp/tracking/store_template.py), in a template cache of its own. The template's first store, which migrates
and saves it, is timed apart. The table gives the median and the 10th/90th percentiles in seconds, and template /
migrations of the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import percentile, print_table, write_json
from benchmarks.harness import RESULTS, machine
from hacrl_exp.tracking import store_template
from hacrl_exp.tracking.store import prepare_mlflow


def new_store_seconds(folder: Path, template: bool) -> float:
    """Seconds to create and open one new store under `folder`."""
    from mlflow.tracking import MlflowClient

    os.environ[store_template.OPT_OUT] = "1" if template else "0"
    database = Path(tempfile.mkdtemp(dir=folder)) / "mlflow.db"
    started = time.perf_counter()
    MlflowClient(f"sqlite:///{database}").search_experiments()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="a seconds-long run: 1 repeat")
    parser.add_argument("--out", default=str(RESULTS / "new_store.json"))
    args = parser.parse_args()
    if args.smoke:
        args.repeats = 1
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["HACRL_CACHE_DIR"] = str(Path(scratch) / "cache")  # no template yet
        prepare_mlflow()
        first = new_store_seconds(Path(scratch), template=True)
        times: dict[str, list[float]] = {"migrations": [], "template": []}
        for _ in range(args.repeats):
            for name in times:
                times[name].append(new_store_seconds(Path(scratch), template=name == "template"))
    medians = {name: statistics.median(values) for name, values in times.items()}
    rows = [[name, medians[name], percentile(v, 0.1), percentile(v, 0.9)] for name, v in times.items()]
    rows += [["first store (migrates and saves the template)", first, "", ""]]
    rows += [["template / migrations", medians["template"] / medians["migrations"], "", ""]]
    print_table(["new store", "median s", "p10 s", "p90 s"], rows, f"A new sqlite MLflow store, {args.repeats} repeats")
    write_json(args.out, {"repeats": args.repeats, "machine": machine(), "first_s": first, "seconds": times,
                          "medians": medians})  # fmt: skip


if __name__ == "__main__":
    main()
