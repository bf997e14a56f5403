"""Peak RSS per training step and in total, what each agent's loading adds, and RSS growth over a 500-step run (≈ 0).

    python -m benchmarks.memory [--presets pair three_way] [--steps 4] [--growth-steps 500] [overrides...]

Each measurement runs in its own child process (so one cannot inherit another's peak), through the package's front
doors only (nothing in it is wrapped or replaced):
  load: each agent of the preset built in turn as its worker builds it (`hacrl_exp.agents.factory.make_agent`,
    warm start from the cache): the RSS that agent added.
  agents: the preset's default-size agents train with HACPO (16 prompts × G 8, ≤ 48 tokens) for --steps steps.
    Per agent, from what the loop logs (metrics.jsonl): trainable parameters and `memory/params_mib` +
    `memory/grads_mib` + `memory/optimizer_mib`. Per step, for all agents together: the peak RSS above the step's
    starting RSS, read from VmHWM, reset (/proc/self/clear_refs) as each step's row reaches metrics.jsonl
    (benchmarks.harness.StepWatcher). Total: the process's peak RSS and its RSS after imports.
  growth: the tiny pair (hacrl_exp.config.presets: hidden 32, 2 layers, add2, 4 prompts × G 4, ≤ 24 tokens) trains
    with HACPO for --growth-steps steps; RSS is sampled at the end of every step (as its row reaches
    metrics.jsonl). Growth = median RSS of the last 50 steps − median of steps 51–100 (the first 50 are allocator
    warm-up), and the slope of a line through steps 51..end.

Not measured any more: the peak RSS of each agent's own phases (its rollout and scoring; its re-tokenising and
update). That split needed the trainer's functions wrapped at run time; the per-step peak covers every agent's
phases together. docs/performance.md's older tables have the per-agent split.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import finish, median, print_table
from benchmarks.harness import (
    BASE_OVERRIDES,
    RESULTS,
    STEP_FLUSH,
    StepWatcher,
    bench_config,
    machine,
    peak_rss_mb,
    rss_mb,
)

GROWTH_TOLERANCE_MB = 10.0
"""'≈ 0': under 10 MiB over the run (~1% of the process) and no steady upward slope."""


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # resets VmHWM to the current RSS


def preset_config(preset: str, steps: int, overrides: list[str]):
    return bench_config(
        [*BASE_OVERRIDES, *STEP_FLUSH, f"agents={preset}", "algorithm=hacpo", f"trainer.steps={steps}", *overrides]
    )


def child_load(preset: str, overrides: list[str]) -> dict:
    """RSS each agent adds when built in declared order, as the agent workers build them."""
    from hacrl_exp.agents.factory import make_agent
    from hacrl_exp.tasks import build_task

    config = preset_config(preset, 1, overrides)
    task, agents, loaded = build_task(config.task), [], {}
    before = rss_mb()
    for index, name in enumerate(config.agents.members):
        agents.append(make_agent(config, task, None, index))  # kept: the next agent loads next to this one
        loaded[name], before = rss_mb() - before, rss_mb()
    return {"preset": preset, "loaded_mb": loaded}


def child_agents(preset: str, steps: int, overrides: list[str]) -> dict:
    from hacrl_exp.trainer.loop import train
    from hacrl_exp.trainer.metrics import read_metrics

    after_imports = rss_mb()
    config = preset_config(preset, steps, overrides)
    out = Path(tempfile.mkdtemp(prefix="hacrl_mem_"))
    ends: dict[int, float] = {}  # step → RSS at its end
    peaks: dict[int, float] = {}  # step → peak RSS since the previous step's end (VmHWM)
    overall = [0.0]

    def on_step(step: int) -> None:
        peak = peak_rss_mb()
        overall[0] = max(overall[0], peak)
        ends[step], peaks[step] = rss_mb(), peak
        reset_peak()

    with StepWatcher(out / "metrics.jsonl", on_step):
        train(config, out)
    above = {s: peaks[s] - ends[s - 1] for s in peaks if s - 1 in ends}  # step 1's start is not seen
    last: dict[str, dict] = {}
    for row in read_metrics(out / "metrics.jsonl"):
        if row["agent"] and "memory/params_mib" in row:
            last[row["agent"]] = row
    keys = ("memory/params_mib", "memory/grads_mib", "memory/optimizer_mib")
    return {
        "preset": preset,
        "rss_after_imports_mb": after_imports,
        "rss_end_mb": rss_mb(),
        "peak_rss_mb": max(overall[0], peak_rss_mb()),
        "step_peak_above_start_mb": above,
        "agents": {
            name: {"params": int(row["memory/trainable_params"]), "state_mb": sum(row[k] for k in keys)}
            for name, row in last.items()
        },
    }


def child_growth(steps: int, overrides: list[str]) -> dict:
    from hacrl_exp.config.presets import tiny_overrides
    from hacrl_exp.trainer.loop import train

    samples: list[tuple[int, float]] = []
    started = time.perf_counter()
    config = bench_config([*BASE_OVERRIDES, *tiny_overrides("pair", steps), *STEP_FLUSH, "algorithm=hacpo", *overrides])
    out = Path(tempfile.mkdtemp(prefix="hacrl_growth_"))
    with StepWatcher(out / "metrics.jsonl", lambda step: samples.append((step, rss_mb()))):
        train(config, out)
    return {"steps": steps, "samples": samples, "seconds": time.perf_counter() - started, "peak_rss_mb": peak_rss_mb()}


def run_child(args: list[str], inline: bool = False) -> dict:
    """One measurement in its own process (inline: in this one, for benchmarks.smoke; its peaks are then shared)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    command = ["--child-out", out, *args]
    if inline:
        main(command)
    else:
        subprocess.run([sys.executable, "-m", "benchmarks.memory", *command], check=True)
    return json.loads(Path(out).read_text())


def growth_summary(samples: list[tuple[int, float]]) -> dict:
    import numpy as np

    steps = np.array([s for s, _ in samples], float)
    rss = np.array([r for _, r in samples], float)
    start = 50 if len(rss) > 150 else len(rss) // 3
    early = float(np.median(rss[start : start + 50]))
    late = float(np.median(rss[-50:]))
    slope = float(np.polyfit(steps[start:], rss[start:], 1)[0]) if len(rss) - start > 2 else 0.0
    return {
        "first_mb": float(rss[0]),
        "early_mb": early,
        "late_mb": late,
        "growth_mb": late - early,
        "slope_mb_per_100_steps": 100 * slope,
        "max_mb": float(rss.max()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["pair", "three_way"])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--growth-steps", type=int, default=500)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(RESULTS / "memory.json"))
    parser.add_argument("--inline", action="store_true", help="measure in this process (benchmarks.smoke)")
    args, overrides = parser.parse_known_args(argv)
    if args.child:
        import torch

        torch.set_num_threads(1)
        kind, _, preset = args.child.partition(":")
        if kind == "growth":
            result = child_growth(args.growth_steps, overrides)
        elif kind == "load":
            result = child_load(preset, overrides)
        else:
            result = child_agents(preset, args.steps, overrides)
        Path(args.child_out).write_text(json.dumps(result))
        return

    started = time.perf_counter()
    info = machine()
    print(f"machine: {info}")
    per_preset = {}
    for preset in args.presets:
        loaded = run_child(["--child", f"load:{preset}", *overrides], args.inline)["loaded_mb"]
        child = ["--child", f"agents:{preset}", "--steps", str(args.steps), *overrides]
        per_preset[preset] = run_child(child, args.inline)
        for name, agent in per_preset[preset]["agents"].items():
            agent["loaded_mb"] = loaded[name]
        print(f"  [{preset}] peak RSS {per_preset[preset]['peak_rss_mb']:.0f} MiB")
    growth = run_child(["--child", "growth", "--growth-steps", str(args.growth_steps), *overrides], args.inline)
    summary = growth_summary(growth["samples"])

    rows = []
    for preset, r in per_preset.items():
        for name, a in r["agents"].items():
            rows.append([preset, name, f"{a['params'] / 1e3:.0f}K", a["state_mb"], a["loaded_mb"]])
    print_table(
        ["preset", "agent", "params", "weights+grads+Adam MiB (memory/*)", "RSS added by loading MiB"],
        rows,
        "Per agent (HACPO, 16 prompts × G 8, ≤ 48 tokens)",
    )
    whole = []
    for preset, r in per_preset.items():
        above = list(r["step_peak_above_start_mb"].values())
        peaks = [median(above), max(above, default=float("nan"))]
        whole.append([preset, r["rss_after_imports_mb"], r["peak_rss_mb"], r["rss_end_mb"], *peaks])
    print_table(
        [
            "preset",
            "RSS after imports MiB",
            "peak RSS MiB",
            "RSS at end MiB",
            "step peak above its start, median MiB",
            "max MiB",
        ],
        whole,
        "Whole process (a step's peak: every agent's phases together, steps 2..)",
    )
    ok = abs(summary["growth_mb"]) <= GROWTH_TOLERANCE_MB
    print_table(
        ["steps", "s", "RSS after step 1", "median 51–100", "median last 50", "growth", "slope MiB/100 steps", "≈ 0"],
        [
            [
                growth["steps"],
                growth["seconds"],
                summary["first_mb"],
                summary["early_mb"],
                summary["late_mb"],
                summary["growth_mb"],
                summary["slope_mb_per_100_steps"],
                "yes" if ok else "no",
            ]
        ],
        f"RSS growth over {growth['steps']} HACPO steps (tiny pair; MiB; tolerance ±{GROWTH_TOLERANCE_MB:.0f})",
    )
    marks = [s for s in (1, 10, 50, 100, 200, 300, 400, 500, growth["steps"]) if s <= growth["steps"]]
    by_step = dict(growth["samples"])
    print_table(
        ["step", *map(str, sorted(set(marks)))],
        [["RSS MiB", *[by_step[s] for s in sorted(set(marks))]]],
        "RSS at the end of selected steps",
    )
    finish(
        "memory",
        started,
        args.out,
        {
            "args": vars(args),
            "overrides": overrides,
            "machine": info,
            "presets": per_preset,
            "growth": growth,
            "growth_summary": summary,
            "growth_ok": ok,
        },
    )


if __name__ == "__main__":
    main()
