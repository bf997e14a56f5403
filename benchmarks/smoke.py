"""Every `python -m benchmarks.<name>` entry point at seconds-long sizes, one after another in one process, so that a
benchmark cannot break without CI noticing (tests/benchmarks/test_entry_points.py runs this).

    python -m benchmarks.smoke [name ...]

Each entry point runs as `python -m` would run it (runpy, run_name="__main__", its own argv) with the arguments in
`ENTRY_POINTS`: tiny agents without warm start, one or two steps, one repeat, JSON written to a temporary folder
($HACRL_BENCH_RESULTS). Its numbers are noise; what is checked is that it runs to the end and exits 0.
gpu_check runs in tests/benchmarks/test_gpu_check.py (its rows run in child processes, with only torch and
transformers importable). Entry points that read ../shared/data are skipped, with the reason, when it is absent.
"""

from __future__ import annotations

import os
import runpy
import sys
import tempfile
import time
import traceback
from pathlib import Path

from hacrl_exp.config.presets import AGENT_MEMBERS
from hacrl_exp.repo import REPO_ROOT

ROOT = REPO_ROOT
DATA = Path(os.environ.get("HACRL_DATA_DIR") or ROOT.parent / "shared" / "data")


def tiny(preset: str = "pair") -> list[str]:
    """Overrides for a run of seconds: tiny agents of `preset`, no warm start, 2 prompts × G 2, ≤ 6 tokens."""
    out = [
        f"agents={preset}",
        "task.tiers=[add2]",
        "task.eval_per_tier=2",
        "trainer.prompts_per_step=2",
        "trainer.group_size=2",
        "trainer.eval_limit=2",
        "trainer.progress=false",
        "rollout.max_new_tokens=6",
        "tracking.backend=none",
    ]
    for name in AGENT_MEMBERS[preset]:
        member = f"agents.members.{name}"
        out += [f"{member}.model.hidden_size=16", f"{member}.model.num_layers=1", f"{member}.model.num_heads=2",
                f"{member}.warm_start.steps=0"]  # fmt: skip
    return out


def entry_args(name: str, out: Path) -> list[str]:
    """The smoke arguments of benchmarks.<name>, writing its JSON under `out`."""
    json_out = ["--out", str(out / f"{name}.json")]
    steps = ["--steps", "2", "--repeats", "1"]
    table = {
        "before_after": ["--smoke", "--steps", "1", "--no-profile", *json_out],  # profile_step: gpu_check's rows
        "collab_cost": [*steps, "--grid", "pair:2", *json_out, *tiny()],
        "default_run": [*json_out, "trainer.steps=1", "trainer.eval_every=0", *tiny()],
        "grader_accuracy": ["--graders", "ours", "--limit", "4", *json_out],
        "grading": ["--repeats", "1", "--limit", "4", "--workers", "1", "--workloads", "gold/grader", "--data-dir",
                    str(DATA), *json_out],
        "memory": ["--inline", "--presets", "pair", "--steps", "2", "--growth-steps", "3", *json_out, *tiny()],
        "memory_peaks": ["--smoke"],
        "new_store": ["--smoke", *json_out],
        "ray_executor": ["--smoke", "--steps", "2", *json_out, *tiny()],
        "reliability": ["--steps", "2", "--skip", "hostile", "crash", *json_out,
                        *(o for o in tiny() if o != "tracking.backend=none")],  # it tracks to MLflow
        "reward_agreement": ["--limit", "4", "--data-dir", str(DATA), *json_out],
        "run_all": ["--smoke", "--only", "scaling"],
        "sampler_step": ["--smoke", *json_out],
        "scaling": ["--smoke", *steps, *json_out],
        "sharded_step": ["--smoke", "--steps", "2", *json_out,
                         *(f"--set={o}" for o in tiny("solo")[1:] if "opt_char" in o or "trainer." in o)],
        "step_time": [*steps, *json_out, *tiny()],
        "trl_gspo": ["--smoke", *steps, "--no-profile", *json_out, *tiny("solo")[1:]],
    }  # fmt: skip
    return table[name]


NEEDS_DATA = ("grading", "reward_agreement")
ELSEWHERE = {
    "gpu_check": "tests/benchmarks/test_gpu_check.py runs it (child processes, torch + transformers only)",
    "__main__": "python -m benchmarks calls benchmarks.run_all.main, run here as run_all",
    "outside_cases": "it reads other graders' git mirrors (--mirrors); its output is tests/rewards/data/outside",
    "scaling": "run_all's smoke runs it (run_all --smoke --only scaling, in its own process)",
}


def entry_points() -> list[str]:
    """Every module of benchmarks/ that runs as `python -m benchmarks.<name>`."""
    names = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        if path.stem != "smoke" and (path.stem == "__main__" or 'if __name__ == "__main__"' in path.read_text()):
            names.append(path.stem)
    return names


def run(name: str, out: Path) -> tuple[str, float]:
    """('ok' | 'skipped: ...' | 'FAILED: ...', seconds) of one entry point run as `python -m benchmarks.<name>`."""
    if name in ELSEWHERE:
        return f"skipped here: {ELSEWHERE[name]}", 0.0
    if name in NEEDS_DATA and not (DATA / "math500.jsonl").is_file():
        return f"skipped: no benchmark data at {DATA}", 0.0
    argv, environ, started = sys.argv, dict(os.environ), time.perf_counter()
    sys.argv = [f"benchmarks/{name}.py", *entry_args(name, out)]
    try:
        runpy.run_module(f"benchmarks.{name}", run_name="__main__", alter_sys=False)
        status = "ok"
    except SystemExit as stop:
        status = "ok" if stop.code in (None, 0) else f"FAILED: exit {stop.code}"
    except Exception:  # report it and go on to the next entry point
        status = "FAILED: " + traceback.format_exc(limit=-3).strip().splitlines()[-1]
        traceback.print_exc()
    finally:  # an entry point may point the environment elsewhere (new_store: its own cache folder, then deleted)
        sys.argv = argv
        os.environ.clear()
        os.environ.update(environ)
    return status, time.perf_counter() - started


def main(names: list[str] | None = None) -> int:
    names = names or sys.argv[1:] or entry_points()
    out = Path(os.environ.setdefault("HACRL_BENCH_RESULTS", tempfile.mkdtemp(prefix="hacrl_smoke_")))
    os.environ.setdefault("HACRL_CACHE_DIR", str(out / "cache"))
    results = {}
    for name in names:
        print(f"\n=== benchmarks.{name} (smoke)", flush=True)
        results[name] = run(name, out)
        print(f"=== benchmarks.{name}: {results[name][0]} ({results[name][1]:.1f} s)", flush=True)
    print("\n| entry point | result | s |\n|---|---|---|")
    for name, (status, seconds) in results.items():
        print(f"| {name} | {status} | {seconds:.1f} |")
    return int(any(status.startswith("FAILED") for status, _ in results.values()))


if __name__ == "__main__":
    sys.exit(main())
