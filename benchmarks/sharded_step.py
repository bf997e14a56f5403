"""A sharded step vs an unsharded one on the same tiny agent: seconds per step, their ratio, the communication share.

    python -m benchmarks.sharded_step [--steps 4] [--out benchmarks/results/sharded_step.json] [--set KEY=VALUE ...]

The agent is agents=solo's opt_char (OPT, hidden 96, 3 layers, char tokenizer; no warm start, so every response
runs to rollout.max_new_tokens and each step does the same work), trained with algorithm=gspo on 8 prompts × G 8 and
algorithm.kl_coef=0.001 (every reward is 0 untrained, so only the KL term gives rows to train, with a reference).
Four ways, one after another, each timing phases 1–3 (rollout; of it, generation) and 5–7 (learn) per step, the first
step dropped:
  W = 1: one unsharded AgentWorker in this process: 1 and 2 torch threads, and 1 thread with
         rollout.sampler=multinomial (transformers' own draw, the default before issue 36);
  W = 2: two AgentWorker ranks (FSDP2 over gloo, hacrl_exp.agents.sharding), one process and 1 thread each, each
         rank generating half the rows (the counter sampler, hacrl_exp.agents.sharding.RankSlicedEngine).
Communication: for one extra step, torch.profiler on rank 0 records the gloo collectives (FSDP2's all-gathers and
reduce-scatters, the gradient-norm all-reduce, the rollouts' all-gather) and the share of the step's wall time spent
inside them. Learning runs the whole batch on every rank (hacrl_exp.trainer.worker.AgentWorker), so W = 2 repeats
that compute on two cores: the learn ratio shows the cost of sharding's communication and redundancy, not a
speed-up. Scoring splits its chunks over the ranks, and generation its rows.
"""

from __future__ import annotations

import argparse
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
    "algorithm.kl_coef=0.001",  # untrained, every reward is 0: KL makes every own row train (a sharded reference too)
    "trainer.prompts_per_step=8",
    "trainer.group_size=8",
    "rollout.max_new_tokens=32",
    "task.tiers=[add2]",
    "tracking.backend=none",
]
COLLECTIVES = ("all_gather", "allgather", "reduce_scatter", "all_reduce", "allreduce", "broadcast")


def run_steps(worker, steps: int, profile: bool) -> dict:
    """Seconds of rollout (and its generation phase) and learn per step (first dropped), and on request one profiled
    step's collective share."""
    t = worker.config.trainer
    rollout, generate, learn = [], [], []
    for step in range(1, steps + 1):
        started = time.perf_counter()
        _, phases = worker.rollout(worker.task.train_problems(step, t.prompts_per_step), t.group_size)
        rolled = time.perf_counter()
        worker.learn({}, torch.ones(1))
        rollout.append(rolled - started)
        generate.append(phases["generate"])
        learn.append(time.perf_counter() - rolled)
    out = {
        "rollout_s": median(rollout[1:]),
        "generate_s": median(generate[1:]),
        "learn_s": median(learn[1:]),
        "step_s": median(rollout[1:]) + median(learn[1:]),
    }
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            started = time.perf_counter()
            worker.rollout(worker.task.train_problems(steps + 1, t.prompts_per_step), t.group_size)
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


def _rank(rank: int, world: int, ports, steps: int, result: str, extra: list[str]) -> None:
    from hacrl_exp.trainer.params import learner_params
    from hacrl_exp.trainer.validate import preflight
    from hacrl_exp.trainer.worker import AgentWorker, RankGroup

    config = preflight([*OVERRIDES, *extra, "executor=ray", f"agents.members.opt_char.world_size={world}"])
    worker = AgentWorker(config, 0, learner_params(config).get(0), 1, None, RankGroup(rank, world))
    if rank == 0:  # rank 0's rendezvous port, to the others (what the Ray executor does through store_port)
        for _ in range(world - 1):
            ports.put(worker.store_port())
    worker.join(worker.store_port() if rank == 0 else ports.get())
    out = run_steps(worker, steps, profile=True)
    worker.close()
    if rank == 0:
        Path(result).write_text(json.dumps(out))


def sharded(steps: int, world: int = 2, extra: tuple[str, ...] = ()) -> dict:
    """W ranks, one spawned process and 1 thread each; rank 0's timings."""
    with tempfile.TemporaryDirectory() as tmp:
        result = str(Path(tmp) / "rank0.json")
        ctx = mp.get_context("spawn")
        ports = ctx.Queue()
        procs = [ctx.Process(target=_rank, args=(r, world, ports, steps, result, list(extra))) for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        return json.loads(Path(result).read_text())


def unsharded(steps: int, threads: int = 2, extra: tuple[str, ...] = ()) -> dict:
    from hacrl_exp.trainer.params import learner_params
    from hacrl_exp.trainer.validate import preflight
    from hacrl_exp.trainer.worker import AgentWorker

    config = preflight([*OVERRIDES, *extra])
    worker = AgentWorker(config, 0, learner_params(config).get(0), threads)
    return run_steps(worker, steps, profile=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--out", default="benchmarks/results/sharded_step.json")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="one more config override")
    parser.add_argument("--smoke", action="store_true", help="W = 1 with 1 thread only (no spawned ranks; seconds)")
    args = parser.parse_args()
    info = machine()
    modes = {  # label: (W, threads per rank, extra overrides)
        "W1_1thread": ("W=1, 1 thread", 1, 1, ()),
        "W1": ("W=1, 2 threads", 1, 2, ()),
        "W1_multinomial": ("W=1, 1 thread, multinomial", 1, 1, ("rollout.sampler=multinomial",)),
        "W2": ("W=2 gloo, 1 thread/rank", 2, 1, ()),
    }
    if args.smoke:  # benchmarks.smoke; the sharded modes' machinery is tests/trainer/test_fsdp.py's
        modes = {"W1_1thread": modes["W1_1thread"]}
    results = {
        key: unsharded(args.steps, threads, (*args.set, *extra))
        if world == 1
        else sharded(args.steps, world, (*args.set, *extra))
        for key, (_, world, threads, extra) in modes.items()
    }
    base = results["W1_1thread"]
    rows = [
        [label, *(f"{results[key][k]:.2f}" for k in ("generate_s", "rollout_s", "learn_s", "step_s")),
         f"{results[key]['generate_s'] / base['generate_s']:.2f}", f"{results[key]['step_s'] / base['step_s']:.2f}",
         f"{100 * results[key]['collective_share']:.0f}%" if "collective_share" in results[key] else "-"]
        for key, (label, *_) in modes.items()
    ]  # fmt: skip
    headers = ["mode", "generate s", "rollout s", "learn s", "s/step", "generate × W=1/1t", "step × W=1/1t",
               "in collectives"]  # fmt: skip
    print_table(headers, rows, "sharded step")
    for key in [k for k in ("W2",) if k in results]:
        print(
            f"{key} collectives (s, one profiled step, rank 0):",
            {k: round(v, 3) for k, v in results[key]["collectives"].items()},
        )
        print(f"{key} collective calls (same step):", results[key]["collective_calls"])
    payload = {"machine": info, "end_load_average": machine()["load_average"], "overrides": args.set}
    write_json(args.out, payload | results)


if __name__ == "__main__":
    main()
