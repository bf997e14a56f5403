"""A sharded agent's step at W = 1, 2 and 4 ranks: seconds per step, each rank's work, the communication share.

    python -m benchmarks.sharded_step [--steps 4] [--worlds 1,2,4] [--out benchmarks/results/sharded_step.json]
                                      [--set KEY=VALUE ...] [--smoke]

The agent is agents=solo's opt_char, widened so that compute dominates a step (OPT, hidden 256, 4 layers, 4 heads, char
tokenizer; no warm start, so every response runs to rollout.max_new_tokens and each step does the same work), trained
with algorithm=gspo on 16 prompts × G 8 = 128 rows and algorithm.kl_coef=0.001 (every reward is 0 untrained, so only the
KL term gives rows to train, with a reference). Each W runs in its own spawned processes, one per rank and one torch
thread each (W = 1 too, so the three are alike), one after another; per step, the first dropped: the seconds of phases
1–3 (rollout; of it, generation) and 5–7 (learn), and each rank's work from its cost meter (rows generated and graded,
tokens through forward and backward; `AgentWorker.take_costs`). The ranks divide generation (the counter sampler's rows,
`agents.sharding.RankSlicedEngine`), grading, scoring (`rank_sliced_logprobs`) and learning (each a token share of every
mini-batch, `trainer.step.update`), so each rank's work is about 1/W of W = 1's; the step time shrinks only where the
machine has a core per rank (W = 4 on 2 cores shares them).
Communication: for one extra step, torch.profiler on rank 0 of W = 2 records the gloo collectives (FSDP2's
all-gathers and reduce-scatters, the gradient-norm all-reduce, the gathered rollouts, rewards and update terms) and
the share of the step's wall time spent inside them (a record lasts until the peer arrives: waiting counts too).
--smoke: W = 1 at the default agent size, 2 steps (benchmarks.smoke; the sharded paths are tests/trainer's).
"""

from __future__ import annotations

import argparse
import importlib
import json
import tempfile
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp

from benchmarks.common import median, print_table, write_json
from benchmarks.harness import machine

OVERRIDES = [
    "agents=solo",
    "algorithm=gspo",
    "agents.members.opt_char.warm_start.steps=0",
    "agents.members.opt_char.model.hidden_size=256",
    "agents.members.opt_char.model.num_layers=4",
    "agents.members.opt_char.model.num_heads=4",
    "algorithm.kl_coef=0.001",  # untrained, every reward is 0: KL makes every own row train (a sharded reference too)
    "trainer.prompts_per_step=16",  # 128 rows: at 64, a decoding step's per-call cost, which W does not divide, weighs
    "trainer.group_size=8",
    "rollout.max_new_tokens=32",
    "task.tiers=[add2]",
    "tracking.backend=none",
]
COLLECTIVES = ("all_gather", "allgather", "reduce_scatter", "all_reduce", "allreduce", "broadcast")


WORK = ("generated_rollouts", "graded_rollouts", "forward_tokens", "backward_tokens")
"""Each rank's work per step, from its cost meter (trainer/costs.py)."""


def run_steps(worker, steps: int, profile: bool) -> dict:
    """Seconds of rollout (and its generation phase) and learn per step, and this rank's work per step (the first
    step dropped); on request one more, profiled step's collective share."""
    t = worker.config.trainer
    rollout, generate, learn = [], [], []
    for step in range(1, steps + 1):
        if step == 2:
            worker.take_costs()  # the first step's work dropped with its times
        started = time.perf_counter()
        _, phases = worker.rollout(worker.task.train_problems(step, t.prompts_per_step), t.group_size, step)
        rolled = time.perf_counter()
        worker.learn({}, torch.ones(1))
        rollout.append(rolled - started)
        generate.append(phases["generate"])
        learn.append(time.perf_counter() - rolled)
    costs = worker.take_costs()
    rank = worker.ranks.rank
    mine = {key: costs.get(f"rank{rank}/{key}", costs[key]) / (steps - 1) for key in WORK}
    out = {
        "rollout_s": median(rollout[1:]),
        "generate_s": median(generate[1:]),
        "learn_s": median(learn[1:]),
        "step_s": median(rollout[1:]) + median(learn[1:]),
        "work": mine,
    }
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            started = time.perf_counter()
            worker.rollout(worker.task.train_problems(steps + 1, t.prompts_per_step), t.group_size, steps + 1)
            worker.learn({}, torch.ones(1))
            wall = time.perf_counter() - started
        comm, calls = {}, {}
        for event in prof.key_averages():
            name = event.key.lower()
            if any(c in name for c in COLLECTIVES) and ("gloo" in name or "c10d" in name):
                comm[event.key] = comm.get(event.key, 0.0) + event.cpu_time_total / 1e6
                calls[event.key] = calls.get(event.key, 0) + event.count
        # gloo:<op> records span each collective's execution (c10d::<op> records only its launch): their sum
        total = sum(v for k, v in comm.items() if k.startswith("gloo:"))
        out |= {"profiled_step_s": wall, "collective_s": total, "collective_share": total / wall, "collectives": comm}
        out["collective_calls"] = calls
    return out


def _rank(rank: int, world: int, ports, steps: int, folder: str, extra: list[str]) -> None:
    from hacrl_exp.agents.ranks import RankGroup
    from hacrl_exp.trainer.params import learner_params
    from hacrl_exp.trainer.validate import preflight
    from hacrl_exp.trainer.worker import AgentWorker

    sharded = ["executor=ray", f"agents.members.opt_char.world_size={world}"] if world > 1 else []
    config = preflight([*OVERRIDES, *extra, *sharded])
    group = RankGroup(rank, world) if world > 1 else None
    worker = AgentWorker(config, 0, learner_params(config).get(0), 1, None, group)
    if world > 1:  # rank 0's rendezvous, to the others (what the Ray executor does through store_port)
        if rank == 0:
            host = "127.0.0.1"
            port = worker.store_port(host)
            for _ in range(world - 1):
                ports.put((host, port))
        else:
            host, port = ports.get()
        worker.join(port, host)
    out = run_steps(worker, steps, profile=world == 2)  # every rank runs the profiled step (collectives)
    worker.close()
    (Path(folder) / f"rank{rank}.json").write_text(json.dumps(out))


def ranks(steps: int, world: int, extra: tuple[str, ...] = ()) -> list[dict]:
    """W ranks, one spawned process and 1 torch thread each; every rank's timings and work."""
    with tempfile.TemporaryDirectory() as tmp:
        ctx = mp.get_context("spawn")
        ports = ctx.Queue()
        # the module by its name: run as `python -m` or by benchmarks.smoke, this file is __main__, which spawned
        # processes cannot import a function from
        target = importlib.import_module("benchmarks.sharded_step")._rank
        procs = [ctx.Process(target=target, args=(r, world, ports, steps, tmp, list(extra))) for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        return [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(world)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--worlds", default="1,2,4", help="comma-separated rank counts (default 1,2,4)")
    parser.add_argument("--out", default="benchmarks/results/sharded_step.json")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="one more config override")
    parser.add_argument("--smoke", action="store_true", help="W = 1, the default agent size (seconds)")
    args = parser.parse_args(argv)
    info = machine()
    worlds = [int(w) for w in args.worlds.split(",")]
    extra = tuple(args.set)
    if args.smoke:  # benchmarks.smoke: the machinery, at the default size and W = 1
        worlds, extra = [1], (*extra, *SMOKE)
    results = {world: ranks(args.steps, world, extra) for world in worlds}
    base = results[worlds[0]][0]
    rows = []
    for world, per_rank in results.items():
        slowest = max(per_rank, key=lambda r: r["step_s"])
        most = {key: max(r["work"][key] for r in per_rank) for key in WORK}
        rows.append([
            f"W={world}", f"{slowest['step_s']:.2f}", f"{slowest['step_s'] / base['step_s']:.2f}",
            f"{slowest['generate_s']:.2f}", f"{slowest['learn_s']:.2f}",
            *(f"{most[key]:.0f} ({most[key] / base['work'][key]:.2f})" for key in WORK),
            f"{100 * per_rank[0]['collective_share']:.0f}%" if "collective_share" in per_rank[0] else "-",
        ])  # fmt: skip
    headers = ["ranks", "s/step", f"× W={worlds[0]}", "generate s", "learn s", "rows generated", "rows graded",
               "forward tokens", "backward tokens", "in collectives"]  # fmt: skip
    print_table(headers, rows, "sharded step: the slowest rank's seconds, the busiest rank's work per step (× W=1)")
    for world, per_rank in results.items():
        if "collectives" in per_rank[0]:
            print(f"W={world} collectives (s, one profiled step, rank 0):",
                  {k: round(v, 3) for k, v in per_rank[0]["collectives"].items()})  # fmt: skip
            print(f"W={world} collective calls (same step):", per_rank[0]["collective_calls"])
    payload = {"machine": info, "end_load_average": machine()["load_average"], "overrides": list(extra)}
    write_json(args.out, payload | {f"W{world}": per_rank for world, per_rank in results.items()})


SMOKE = (
    "agents.members.opt_char.model.hidden_size=96",
    "agents.members.opt_char.model.num_layers=3",
    "agents.members.opt_char.model.num_heads=4",
    "trainer.prompts_per_step=8",  # the smoke run checks the machinery: 64 rows are enough
)


if __name__ == "__main__":
    main()
