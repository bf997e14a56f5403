"""Peak RSS per agent and in total, and RSS growth over a 500-step run (must be ≈ 0).

    python -m benchmarks.memory [--presets pair three_way] [--steps 4] [--growth-steps 500] [overrides...]

Each measurement runs in its own child process (so one cannot inherit another's peak):
  agents: the preset's default-size agents train with HACPO (16 prompts × G 8, ≤ 48 tokens) for --steps steps.
    Per agent: parameters, the RSS its loading added, and the peak RSS above the phase's starting RSS during
    its own phases (generate + reward + scoring; re-tokenising + update), read from VmHWM after resetting it
    (/proc/self/clear_refs) before each phase. Total: the process's peak RSS and its RSS after imports.
  growth: the tiny pair of tests/e2e (hidden 32, 2 layers, add2, 4 prompts × G 4, ≤ 24 tokens) trains with
    HACPO for --growth-steps steps; RSS is sampled at the start of every step. Growth = median RSS of the
    last 50 steps − median of steps 51–100 (the first 50 are allocator warm-up), and the slope of a line
    through steps 51..end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.common import finish, print_table
from benchmarks.harness import RESULTS, call_arguments, machine, peak_rss_mb, rss_mb

GROWTH_TOLERANCE_MB = 10.0
"""'≈ 0': under 10 MiB over the run (~1% of the process) and no steady upward slope."""


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # resets VmHWM to the current RSS


class MemoryRecorder:
    """Per agent: RSS added by loading, and peak RSS above the start of each of its phases."""

    def __init__(self) -> None:
        self.loaded: dict[str, float] = {}
        self.peaks: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.params: dict[str, int] = {}
        self.overall_peak = 0.0
        self._saved: list[tuple[object, str, object]] = []

    def __enter__(self) -> MemoryRecorder:
        from hacrl_exp.agents import factory
        from hacrl_exp.trainer import step, worker

        def patch(module, name, wrapper):
            self._saved.append((module, name, getattr(module, name)))
            setattr(module, name, wrapper(getattr(module, name)))

        patch(factory, "build_agent", self._on_build)
        names: dict[int, str] = {}  # agent index → name, learnt from collect_rollouts(agent, index, ...)
        patch(
            worker,
            "collect_rollouts",
            lambda fn: self._phase(fn, "rollout", lambda a: names.setdefault(a["index"], a["agent"].name)),
        )
        patch(step, "build_batch", lambda fn: self._phase(fn, "update", lambda a: names[a["params"].index]))
        patch(step, "update", lambda fn: self._phase(fn, "update", lambda a: a["agent"].name))
        self._before_build = rss_mb()
        return self

    def __exit__(self, *exc) -> None:
        for module, name, original in reversed(self._saved):
            setattr(module, name, original)

    def _on_build(self, fn):
        def wrapped(name, *args, **kwargs):
            agent = fn(name, *args, **kwargs)
            now = rss_mb()
            self.loaded[name] = now - self._before_build  # model load (tiny_model) + optimizer/engine
            self._before_build = now
            self.params[name] = sum(p.numel() for p in agent.model.parameters())
            return agent

        return wrapped

    def reset_peak(self) -> None:
        """Fold the peak so far into the run's overall peak, then reset VmHWM."""
        self.overall_peak = max(self.overall_peak, peak_rss_mb())
        reset_peak()

    def _phase(self, fn, phase: str, agent_name):
        def wrapped(*args, **kwargs):
            self.reset_peak()
            start = rss_mb()
            out = fn(*args, **kwargs)
            name = agent_name(call_arguments(fn, args, kwargs))  # by name: robust to new parameters
            self.peaks[name][phase] = max(self.peaks[name][phase], peak_rss_mb() - start)
            return out

        return wrapped


def child_agents(preset: str, steps: int, overrides: list[str]) -> dict:
    from benchmarks.harness import BASE_OVERRIDES, bench_config
    from hacrl_exp.trainer.loop import train

    after_imports = rss_mb()
    config = bench_config(
        [*BASE_OVERRIDES, f"agents={preset}", "algorithm=hacpo", f"trainer.steps={steps}", *overrides]
    )
    with MemoryRecorder() as recorder:
        train(config, Path(tempfile.mkdtemp(prefix="hacrl_mem_")))
        recorder.reset_peak()
    return {
        "preset": preset,
        "rss_after_imports_mb": after_imports,
        "rss_end_mb": rss_mb(),
        "peak_rss_mb": recorder.overall_peak,
        "agents": {
            name: {
                "params": recorder.params[name],
                "state_mb": recorder.params[name] * 16 / 2**20,  # fp32 weights + grads + AdamW m and v
                "loaded_mb": recorder.loaded[name],
                "peak_rollout_mb": recorder.peaks[name]["rollout"],
                "peak_update_mb": recorder.peaks[name]["update"],
            }
            for name in recorder.params
        },
    }


def child_growth(steps: int, overrides: list[str]) -> dict:
    from benchmarks.harness import run_training
    from hacrl_exp.config.presets import tiny_overrides

    samples: list[tuple[int, float]] = []
    started = time.perf_counter()
    run_training(
        [*tiny_overrides("pair", steps), "algorithm=hacpo", *overrides],
        steps,
        Path(tempfile.mkdtemp(prefix="hacrl_growth_")),
        on_step_start=lambda step: samples.append((step, rss_mb())),
        keep=False,  # the harness's own per-step records would grow the process by ~1 KiB a step
    )
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
        result = (
            child_growth(args.growth_steps, overrides)
            if kind == "growth"
            else child_agents(preset, args.steps, overrides)
        )
        Path(args.child_out).write_text(json.dumps(result))
        return

    started = time.perf_counter()
    info = machine()
    print(f"machine: {info}")
    per_preset = {}
    for preset in args.presets:
        child = ["--child", f"agents:{preset}", "--steps", str(args.steps), *overrides]
        per_preset[preset] = run_child(child, args.inline)
        print(f"  [{preset}] peak RSS {per_preset[preset]['peak_rss_mb']:.0f} MiB")
    growth = run_child(["--child", "growth", "--growth-steps", str(args.growth_steps), *overrides], args.inline)
    summary = growth_summary(growth["samples"])

    rows = []
    for preset, r in per_preset.items():
        for name, a in r["agents"].items():
            rows.append(
                [
                    preset,
                    name,
                    f"{a['params'] / 1e3:.0f}K",
                    a["state_mb"],
                    a["loaded_mb"],
                    a["peak_rollout_mb"],
                    a["peak_update_mb"],
                ]
            )
    print_table(
        [
            "preset",
            "agent",
            "params",
            "weights+grads+Adam MiB",
            "RSS added by loading MiB",
            "peak above start, rollout+scoring MiB",
            "peak above start, re-tokenise+update MiB",
        ],
        rows,
        "Per agent (HACPO, 16 prompts × G 8, ≤ 48 tokens)",
    )
    print_table(
        ["preset", "RSS after imports MiB", "peak RSS MiB", "RSS at end MiB"],
        [[p, r["rss_after_imports_mb"], r["peak_rss_mb"], r["rss_end_mb"]] for p, r in per_preset.items()],
        "Whole process",
    )
    ok = abs(summary["growth_mb"]) <= GROWTH_TOLERANCE_MB
    print_table(
        ["steps", "s", "RSS step 1", "median 51–100", "median last 50", "growth", "slope MiB/100 steps", "≈ 0"],
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
        "RSS at the start of selected steps",
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
