"""Every `python -m benchmarks.<name>` entry point runs to the end in its smoke mode (benchmarks.smoke), so a change
that breaks a benchmark fails CI instead of waiting for the next person who runs it (issue 25: benchmarks.trl_gspo
had been failing since collect_rollouts gained a parameter; the benchmarks now measure through the front door,
tests/benchmarks/test_front_door.py)."""

import os
import subprocess
import sys
from pathlib import Path

from benchmarks.smoke import ELSEWHERE, entry_args, entry_points

ROOT = Path(__file__).resolve().parents[2]


def test_every_entry_point_has_smoke_arguments(tmp_path):
    names = entry_points()
    assert {"trl_gspo", "gpu_check", "memory_peaks", "run_all", "__main__"} <= set(names)
    for name in names:
        assert name in ELSEWHERE or entry_args(name, tmp_path), name


def test_every_entry_point_runs_in_smoke_mode(tmp_path):
    """One process runs them all (imports once): about a minute on 2 idle cores, more on a busy machine."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HACRL_BENCH_RESULTS": str(tmp_path), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.smoke"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    summary = result.stdout.rsplit("| entry point | result | s |", 1)[1]  # the last table: the entry points' results
    table = [line for line in summary.splitlines() if line.startswith("| ")]
    statuses = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in table}
    assert set(statuses) == set(entry_points())
    for name, status in statuses.items():
        assert status == "ok" or status.startswith("skipped"), (name, status)
    assert statuses["trl_gspo"] == "ok"  # our GSPO step next to TRL's (trl is in the dev extra)
