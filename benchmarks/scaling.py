"""How a HACPO step grows with the number of agents N (1–4), the group size G (4–16) and the response length.

    python -m benchmarks.scaling [--steps 3] [--repeats 3] [overrides...]

Three sweeps around one centre point (pair, HACPO, 16 prompts, G 8, ≤ 48 new tokens), measured in one process,
interleaved, each run's first step dropped (the shared centre point is measured once):
  N: solo (GSPO, = HACPO without a partner), pair, three_way, four_way (benchmarks/conf/agents/four_way.yaml);
  G: 4, 8, 16 per agent;
  length: rollout.max_new_tokens 8, 16, 32, 48 (the warm-started agents stop by themselves at 31–42 tokens,
  so smaller caps shorten every response).
Each sweep gets a least-squares line against its natural work measure (rows trained for N, G for G, mean
response tokens for length) and the per-phase costs per unit of work, which say how the cost grows.
Numbers come from the runs' metrics.jsonl (benchmarks.harness.step_records). "rows trained" is the step's increase
of `cost/trained_rows`: rows run through forward + backward, after skip-zero-advantage. The tables of
docs/performance.md measured before this (by wrapping the trainer's functions) counted the learner batch instead,
zero-advantage rows included; the loop does not log that count, so those row counts and their per-row fits are no
longer produced as they were.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import finish, print_table
from benchmarks.harness import RESULTS, machine, measure, summarize

CENTRE = {"agents": "pair", "algorithm": "hacpo", "G": 8, "L": 48}
PROMPTS = 16
N_PRESETS = {1: ("solo", "gspo"), 2: ("pair", "hacpo"), 3: ("three_way", "hacpo"), 4: ("four_way", "hacpo")}
GROUPS = (4, 8, 16)
LENGTHS = (8, 16, 32, 48)


def point(agents: str, algorithm: str, group: int, length: int) -> tuple[str, list[str]]:
    label = f"{agents} {algorithm} G{group} L{length}"
    return label, [
        f"agents={agents}",
        f"algorithm={algorithm}",
        f"trainer.group_size={group}",
        f"trainer.prompts_per_step={PROMPTS}",
        f"rollout.max_new_tokens={length}",
    ]


def per(value: float, work: float) -> float:
    """value per unit of work; NaN when there was none (a smoke run's untrained agents run no row)."""
    return value / work if work else float("nan")


def fit(x: list[float], y: list[float]) -> dict:
    """y ≈ a + b·x by least squares, with R² (NaN when x does not vary)."""
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    if np.ptp(xs) == 0:
        return {"intercept": float("nan"), "slope": float("nan"), "r2": float("nan")}
    b, a = np.polyfit(xs, ys, 1)
    residual = ys - (a + b * xs)
    r2 = 1 - float((residual**2).sum()) / max(float(((ys - ys.mean()) ** 2).sum()), 1e-300)
    return {"intercept": float(a), "slope": float(b), "r2": r2}


# (table label, fits key, slope scale, decimals, slope unit) of the least-squares table
FIT_ROWS = [
    ("step s vs rows trained (N sweep)", "N_vs_rows", 1e3, 3, "ms/row"),
    ("update s vs rows trained (N sweep)", "N_update_vs_rows", 1e3, 3, "ms/row"),
    ("generate s vs tokens (N sweep)", "N_generate_vs_tokens", 1e6, 1, "µs/token"),
    ("step s vs G", "G", 1, 4, "s per unit of G"),
    ("update s vs G", "G_update", 1, 4, "s per unit of G"),
    ("generate s vs G", "G_generate", 1, 4, "s per unit of G"),
    ("step s vs mean response tokens", "length", 1e3, 2, "ms/token"),
    ("generate s vs mean response tokens", "length_generate", 1e3, 2, "ms/token"),
    ("update s vs mean response tokens", "length_update", 1e3, 2, "ms/token"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "scaling.json"))
    parser.add_argument("--smoke", action="store_true", help="two points per sweep at G ≤ 4, ≤ 8 tokens (seconds)")
    args, overrides = parser.parse_known_args()
    n_presets, groups, lengths, centre = N_PRESETS, GROUPS, LENGTHS, CENTRE
    if args.smoke:  # benchmarks.smoke: the same code on the smallest sweeps
        n_presets = {n: N_PRESETS[n] for n in (1, 2)}
        groups, lengths, centre = (2, 4), (4, 8), {**CENTRE, "G": 2, "L": 8}
    started = time.perf_counter()
    info = machine()
    print(f"machine: {info}")
    sweeps: dict[str, list[tuple[float, str]]] = {"N": [], "G": [], "length": []}
    configs: dict[str, list[str]] = {}
    for n, (preset, algorithm) in n_presets.items():
        label, ov = point(preset, algorithm, centre["G"], centre["L"])
        configs[label], _ = [*ov, *overrides], sweeps["N"].append((n, label))
    for group in groups:
        label, ov = point(centre["agents"], centre["algorithm"], group, centre["L"])
        configs[label], _ = [*ov, *overrides], sweeps["G"].append((group, label))
    for length in lengths:
        label, ov = point(centre["agents"], centre["algorithm"], centre["G"], length)
        configs[label], _ = [*ov, *overrides], sweeps["length"].append((length, label))
    if args.smoke:  # tiny agents without warm start, per point's preset
        from benchmarks.smoke import tiny

        configs = {label: [*ov, *tiny(label.split()[0])[1:]] for label, ov in configs.items()}
    work = Path(tempfile.mkdtemp(prefix="hacrl_scaling_"))
    summary = {label: summarize(recs) for label, recs in measure(configs, args.steps, args.repeats, work).items()}

    def totals(label: str) -> dict:
        s = summary[label]
        agents = s["agents"].values()
        rows = sum(a.get("rows", 0.0) for a in agents)
        tokens = sum(a["tokens"] for a in agents)
        rollouts = sum(a["rollouts"] for a in agents)
        return {"s": s, "rows": rows, "tokens": tokens, "rollouts": rollouts, "mean_len": per(tokens, rollouts)}

    fits, tables = {}, {}
    headers = [
        "s/step",
        "CPU s/step",
        "generate",
        "score own",
        "score cross",
        "update",
        "rollouts",
        "tokens",
        "rows trained",
        "generate ms/1k tok",
        "update ms/1k rows",
    ]

    def row(x, t: dict) -> list:
        s = t["s"]
        return [
            x,
            s["total"],
            s["cpu"],
            s["generate"],
            s["score_own"],
            s["build_batch"],
            s["update"],
            int(t["rollouts"]),
            int(t["tokens"]),
            int(t["rows"]),
            1e6 * per(s["generate"], t["tokens"]),
            1e6 * per(s["update"], t["rows"]),
        ]

    sweep_n = [(n, totals(label)) for n, label in sweeps["N"]]
    tables["N"] = [row(n, t) for n, t in sweep_n]
    fits["N_vs_rows"] = fit([t["rows"] for _, t in sweep_n], [t["s"]["total"] for _, t in sweep_n])
    fits["N_update_vs_rows"] = fit([t["rows"] for _, t in sweep_n], [t["s"]["update"] for _, t in sweep_n])
    fits["N_generate_vs_tokens"] = fit([t["tokens"] for _, t in sweep_n], [t["s"]["generate"] for _, t in sweep_n])
    print_table(["N", *headers], tables["N"], "Step time vs number of agents (HACPO; N = 1 is GSPO), G 8, ≤ 48 tokens")

    sweep_g = [(g, totals(label)) for g, label in sweeps["G"]]
    tables["G"] = [row(g, t) for g, t in sweep_g]
    fits["G"] = fit([g for g, _ in sweep_g], [t["s"]["total"] for _, t in sweep_g])
    fits["G_update"] = fit([g for g, _ in sweep_g], [t["s"]["update"] for _, t in sweep_g])
    fits["G_generate"] = fit([g for g, _ in sweep_g], [t["s"]["generate"] for _, t in sweep_g])
    print_table(["G", *headers], tables["G"], "Step time vs G per agent (pair, HACPO, ≤ 48 tokens)")

    sweep_l = [(length, totals(label)) for length, label in sweeps["length"]]
    tables["length"] = [[f"{cap} (mean {t['mean_len']:.1f})", *row(cap, t)[1:]] for cap, t in sweep_l]
    fits["length"] = fit([t["mean_len"] for _, t in sweep_l], [t["s"]["total"] for _, t in sweep_l])
    fits["length_generate"] = fit([t["mean_len"] for _, t in sweep_l], [t["s"]["generate"] for _, t in sweep_l])
    fits["length_update"] = fit([t["mean_len"] for _, t in sweep_l], [t["s"]["update"] for _, t in sweep_l])
    print_table(
        ["max new tokens (mean response)", *headers],
        tables["length"],
        "Step time vs response length (pair, HACPO, G 8)",
    )

    fit_rows = [
        [label, fits[key]["intercept"], f"{fits[key]['slope'] * scale:.{digits}f} {unit}", fits[key]["r2"]]
        for label, key, scale, digits, unit in FIT_ROWS
    ]
    print_table(["fit", "intercept s", "slope", "R²"], fit_rows, "Least-squares lines")
    finish(
        "scaling",
        started,
        args.out,
        {
            "args": vars(args),
            "overrides": overrides,
            "machine": info,
            "summary": summary,
            "tables": tables,
            "fits": fits,
        },
    )


if __name__ == "__main__":
    main()
