"""The whole performance suite in one command, sized to finish in ≤ 15 minutes on 2 CPU cores from a fresh clone.

    python -m benchmarks [--fresh-cache] [--only trl_gspo collab_cost ...] [--quick]
    python -m benchmarks.run_all ...            (the same)

1. prepare: warm-start every agent the suite uses (four_way = opt_char, gpt2_bpe, llama_char, gpt2_char, and the
   tiny pair of the memory run) into the warm-start cache, two at a time. On a fresh clone this
   is the only training that is not measured; later runs find the cache. --fresh-cache uses an empty temporary
   cache, as a fresh clone on a new machine would.
2. trl_gspo, collab_cost, scaling, memory: each in its own process with its default sizes (see their
   docstrings), printing Markdown tables and writing benchmarks/results/<name>.json; the printed output is also
   saved to benchmarks/results/<name>.md. trl_gspo is skipped, with a note, when trl is not installed
   (pip install -e ".[bench]").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks.harness import RESULTS

SUITE = ("trl_gspo", "collab_cost", "scaling", "memory", "memory_peaks")
QUICK = {  # a smoke run of the whole pipeline in ~3 minutes (not for the docs)
    "trl_gspo": ["--steps", "3", "--repeats", "1", "--no-profile"],
    "collab_cost": ["--steps", "2", "--repeats", "1", "--grid", "pair:4", "three_way:4"],
    "scaling": ["--steps", "2", "--repeats", "1"],
    "memory": ["--steps", "2", "--growth-steps", "60", "--presets", "pair"],
    "memory_peaks": ["--smoke"],
}
BUDGET_S = 15 * 60


def _warm_start(job: tuple[list[str], str]) -> float:
    """Worker: warm-start (or load) one agent of a config, at its index there (the index seeds it)."""
    import torch

    from benchmarks.harness import bench_config
    from hacrl_exp.agents.factory import warm_started_tiny_model
    from hacrl_exp.tasks import build_task

    torch.set_num_threads(1)
    overrides, name = job
    config = bench_config(overrides)
    started = time.perf_counter()
    index = list(config.agents.members).index(name)
    warm_started_tiny_model(config.agents.members[name], build_task(config.task), config, index)
    return time.perf_counter() - started


def prepare() -> float:
    """Warm-start (or find in the cache) every agent the suite trains; returns seconds.

    Two worker processes with one thread each: tiny models barely use a second thread, so two warm starts
    side by side finish sooner than one after the other with two threads each."""
    from concurrent.futures import ProcessPoolExecutor

    from hacrl_exp.config.presets import tiny_overrides

    four = ["agents=four_way", "trainer.progress=false"]
    tiny = tiny_overrides("pair")
    jobs = [(four, "llama_char"), (four, "opt_char"), (four, "gpt2_bpe"), (four, "gpt2_char")]
    jobs += [(tiny, "opt_char"), (tiny, "gpt2_bpe")]  # longest first
    started = time.perf_counter()
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_warm_start, jobs))
    return time.perf_counter() - started


def run(name: str, extra: list[str], env: dict) -> tuple[float, int]:
    """Run one benchmark in its own process, echoing and saving its output; returns (seconds, exit code)."""
    started = time.perf_counter()
    command = [sys.executable, "-m", f"benchmarks.{name}", *extra]
    print(f"\n## {name}\n\n`{' '.join(['python', '-m', f'benchmarks.{name}', *extra])}`", flush=True)
    lines = []
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.md").write_text("".join(lines))
    return time.perf_counter() - started, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh-cache", action="store_true", help="warm-start into an empty temporary cache")
    parser.add_argument("--only", nargs="+", choices=SUITE, default=list(SUITE))
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the pipeline, numbers are noise")
    parser.add_argument("--smoke", action="store_true", help="no warm starts, each part in its seconds-long smoke mode")
    args = parser.parse_args()
    started = time.perf_counter()
    env = dict(os.environ, HF_HUB_DISABLE_PROGRESS_BARS="1", TOKENIZERS_PARALLELISM="false")
    if args.fresh_cache:
        env["HACRL_CACHE_DIR"] = tempfile.mkdtemp(prefix="hacrl_cache_")
        os.environ["HACRL_CACHE_DIR"] = env["HACRL_CACHE_DIR"]
    report = {"load_average_start": os.getloadavg(), "cores": os.cpu_count(), "fresh_cache": args.fresh_cache}
    print(f"# Performance suite\n\nload average {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
    report["prepare_s"] = 0.0 if args.smoke else prepare()
    print(f"\nprepare (warm starts / cache): {report['prepare_s']:.0f} s", flush=True)
    report["benchmarks"] = {}
    for name in args.only:
        if name == "trl_gspo" and importlib.util.find_spec("trl") is None:
            print("\n## trl_gspo\n\nskipped: trl is not installed (pip install -e '.[bench]')")
            report["benchmarks"][name] = {"skipped": "trl not installed"}
            continue
        if args.smoke:
            from benchmarks.smoke import entry_args

            extra = entry_args(name, RESULTS)
        else:
            extra = QUICK[name] if args.quick else []
        seconds, code = run(name, extra, env)
        report["benchmarks"][name] = {"seconds": seconds, "exit_code": code, "load_average_after": os.getloadavg()}
    total = time.perf_counter() - started
    report["total_s"] = total
    print("\n## Suite timing\n")
    print("| part | seconds |\n|---|---|")
    print(f"| prepare (warm starts) | {report['prepare_s']:.0f} |")
    for name, r in report["benchmarks"].items():
        print(f"| {name} | {r.get('seconds', 0):.0f}{' (FAILED)' if r.get('exit_code') else ''} |")
    print(f"| **total** | **{total:.0f}** ({total / 60:.1f} min; budget {BUDGET_S // 60} min) |")
    (RESULTS / "run_all.json").write_text(json.dumps(report, indent=1))
    if any(r.get("exit_code") for r in report["benchmarks"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
