"""HACPO vs GSPO vs GSPO×2 per step with N = 2 and N = 3 agents: phases, rollouts and tokens per agent.

    python -m benchmarks.collab_cost [--steps 4] [--repeats 3] [--grid pair:4 pair:8 three_way:4] [overrides...]

Each grid point (agents preset : G per agent) runs GSPO, HACPO and GSPO×2; presets with N ≥ 3 agents also run
the resource-equivalent GSPO×N (G·N per agent, 2·N updates: algorithm=gspo with trainer.group_size=N·G and
trainer.minibatches_per_block=2·N) and HACPO on the ring topology (each learner learns from one partner).
Every configuration runs --repeats times, interleaved in one process, from the same cached warm-started
agents, 16 prompts per step, 1 torch thread; each run's first step is dropped and one extra run warms the
process up. Prints medians per step and per agent, and the issue-8 targets (on wall-clock seconds; CPU
seconds of the process are shown as a check against other jobs on the machine):
  HACPO step ≤ 1.5× a GSPO step at the same G;  HACPO at G = 4 per agent ≤ 0.75× GSPO×2 (8 per agent);
  cross-scoring (re-tokenising partners' rollouts and building the learner batch) ≤ 25% of a HACPO step.

Every number is read from the runs' metrics.jsonl (benchmarks.harness.step_records): phase seconds from `time/*`,
work per agent from the step's increase of `train/rollouts_total`, `train/tokens_total` and `cost/trained_rows`
(rows run through forward + backward, after skip-zero-advantage), `train/updates`. "rows not run" is
1 − `train/rows_run_share`: the batch rows skipped for a zero advantage (no KL term in these configs). The tables
of docs/performance.md measured before this (by wrapping the trainer's functions) counted "rows" as the learner
batch, zero-advantage rows included; the loop does not log that count, so it is no longer produced.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.common import finish, print_table
from benchmarks.harness import PHASES, RESULTS, machine, measure, summarize

N_OF = {"solo": 1, "pair": 2, "three_way": 3, "ring": 3, "star": 3, "four_way": 4}


def grid_configs(preset: str, group: int) -> dict[str, list[str]]:
    """label → overrides for one grid point."""
    n = N_OF[preset]
    base = [f"agents={preset}", f"trainer.group_size={group}"]
    out = {f"{preset} G{group} {a}": [*base, f"algorithm={a}"] for a in ("gspo", "hacpo", "gspo_x2")}
    if n >= 3:
        out[f"{preset} G{group} gspo_x{n}"] = [
            f"agents={preset}",
            "algorithm=gspo",
            f"trainer.group_size={n * group}",
            f"trainer.minibatches_per_block={2 * n}",
        ]
        out[f"{preset} G{group} hacpo_ring"] = ["agents=ring", f"trainer.group_size={group}", "algorithm=hacpo"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="steps per run (the first is dropped)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--grid", nargs="+", default=["pair:4", "pair:8", "three_way:4"], help="preset:G ...")
    parser.add_argument("--out", default=str(RESULTS / "collab_cost.json"))
    args, overrides = parser.parse_known_args()
    started = time.perf_counter()
    info = machine()
    print(f"machine: {info}")
    grid = [(p, int(g)) for p, g in (item.split(":") for item in args.grid)]
    configs: dict[str, list[str]] = {}
    for preset, group in grid:
        configs.update({k: [*v, *overrides] for k, v in grid_configs(preset, group).items()})
    work = Path(tempfile.mkdtemp(prefix="hacrl_collab_"))
    summary = {name: summarize(recs) for name, recs in measure(configs, args.steps, args.repeats, work).items()}

    rows = []
    for name, s in summary.items():
        preset, group, algorithm = name.split()
        agents = list(s["agents"].values())
        rows.append(
            [
                N_OF[preset],
                group[1:],
                algorithm,
                s["total"],
                s["cpu"],
                *[s[p] for p in PHASES],
                s["other"],
                int(agents[0]["rollouts"]),
                int(sum(a["tokens"] for a in agents) / len(agents)),
                int(agents[0].get("rows", 0)),
                int(agents[0].get("updates", 0)),
            ]
        )
    print_table(
        [
            "N",
            "G",
            "algorithm",
            "s/step",
            "CPU s/step",
            *PHASES,
            "other",
            "rollouts/agent",
            "tokens/agent",
            "rows trained/learner",
            "updates/learner",
        ],
        rows,
        "Median seconds per step by phase (all agents together), and work per agent per step",
    )

    agent_rows = []
    for name, s in summary.items():
        preset, group, algorithm = name.split()
        for agent, a in s["agents"].items():
            not_run = 1.0 - a["rows_run_share"] if "rows_run_share" in a else 0.0
            agent_rows.append(
                [
                    N_OF[preset],
                    group[1:],
                    algorithm,
                    agent,
                    *[a.get(p, 0.0) for p in PHASES],
                    int(a["rollouts"]),
                    int(a["tokens"]),
                    int(a.get("rows", 0)),
                    not_run,
                ]
            )
    print_table(
        ["N", "G", "algorithm", "agent", *PHASES, "rollouts", "tokens", "rows trained", "rows not run"],
        agent_rows,
        "Per agent: seconds per step by phase, rollouts and tokens generated, rows trained (medians)",
    )

    target_rows, targets = [], {}

    def ratio(a: str, b: str) -> tuple[float, float]:
        return summary[a]["total"] / summary[b]["total"], summary[a]["cpu"] / summary[b]["cpu"]

    for preset, group in grid:
        n, key = N_OF[preset], f"{preset} G{group}"
        wall, cpu = ratio(f"{key} hacpo", f"{key} gspo")
        target_rows.append([n, group, "HACPO / GSPO step, same G", wall, cpu, "≤ 1.5", verdict(wall, 1.5)])
        x2_wall, x2_cpu = ratio(f"{key} hacpo", f"{key} gspo_x2")
        goal = "≤ 0.75" if group == 4 else "(target at G 4)"
        met = verdict(x2_wall, 0.75) if group == 4 else ""
        target_rows.append([n, group, f"HACPO / GSPO×2 ({2 * group} per agent)", x2_wall, x2_cpu, goal, met])
        hacpo = summary[f"{key} hacpo"]
        cross = hacpo["build_batch"] / hacpo["total"]
        target_rows.append([n, group, "cross-scoring share of a HACPO step", cross, "", "≤ 0.25", verdict(cross, 0.25)])
        targets[key] = {
            "hacpo_over_gspo": wall,
            "hacpo_over_gspo_x2": x2_wall,
            "cross_share": cross,
            "cpu": {"hacpo_over_gspo": cpu, "hacpo_over_gspo_x2": x2_cpu},
        }
        if n >= 3:
            xn_wall, xn_cpu = ratio(f"{key} hacpo", f"{key} gspo_x{n}")
            target_rows.append(
                [
                    n,
                    group,
                    f"HACPO / GSPO×{n} ({n * group} per agent, resource-equivalent)",
                    xn_wall,
                    xn_cpu,
                    "(info)",
                    "",
                ]
            )
            ring_wall, ring_cpu = ratio(f"{key} hacpo_ring", f"{key} gspo")
            target_rows.append(
                [n, group, "HACPO ring / GSPO step", ring_wall, ring_cpu, "(≤ 1.5)", verdict(ring_wall, 1.5)]
            )
            ring_x2, ring_x2_cpu = ratio(f"{key} hacpo_ring", f"{key} gspo_x2")
            target_rows.append(
                [
                    n,
                    group,
                    "HACPO ring / GSPO×2",
                    ring_x2,
                    ring_x2_cpu,
                    "(≤ 0.75)" if group == 4 else "",
                    verdict(ring_x2, 0.75) if group == 4 else "",
                ]
            )
            targets[key].update(
                {f"hacpo_over_gspo_x{n}": xn_wall, "ring_over_gspo": ring_wall, "ring_over_gspo_x2": ring_x2}
            )
    print_table(["N", "G", "ratio", "wall", "CPU", "target", "met"], target_rows, "Targets (issue 8)")
    finish(
        "collab_cost",
        started,
        args.out,
        {
            "args": vars(args),
            "overrides": overrides,
            "machine": info,
            "summary": summary,
            "targets": targets,
        },
    )


def verdict(value: float, limit: float) -> str:
    return "yes" if value <= limit else "no"


if __name__ == "__main__":
    main()
