"""Our GSPO step vs TRL 1.16 GRPOTrainer in GSPO mode, side by side, plus the loss-equality check.

    python -m benchmarks.trl_gspo [--steps 5] [--repeats 4] [--no-profile] [overrides...]

Same work on both sides: the warm-started opt_char agent (one copy each), the task's prompts of steps 1..S
(16 per step, in order), G = 8, at most 48 new tokens, sampling at temperature 1 / top_p 1 / no top-k,
2 optimizer updates of 64 sequences per step (TRL: steps_per_generation=2, per_device_train_batch_size=64,
so TRL also recomputes the old log-probs), AdamW lr 1e-4 wd 0.01 constant, grad clip 1, 1 torch thread, no KL.
TRL: importance_sampling_level="sequence", loss_type="grpo", epsilon 3e-4, epsilon_high 4e-4, beta 0, no
gradient checkpointing, fp32, optim adamw_torch (ours), no logging. One of our steps = 2 TRL optimizer steps.
Repeats alternate ours/TRL; the first step of each run is dropped; one extra run of each warms the process.

Where the time goes, in the same buckets on both sides: generate, reward, scoring the old log-probs, batch
preparation / advantages, update (forward with grad, backward, clip and optimizer step), the rest. Ours are read from
the run's metrics.jsonl (`time/<phase>_s`, `time/other_s`; benchmarks.harness), CPU seconds from its
`cost/process_seconds`. TRL logs no phase times, so its buckets come from wrapping methods of the one GRPOTrainer
instance this script builds (`_generate`, `_calculate_rewards`, `_generate_and_score_completions`, the log-prob
pass) and from its callbacks (step begin to optimizer step: the update); nothing module- or class-level is replaced.
Unless --no-profile, one more run of each side runs under cProfile.

Not measured any more: the split of an update into forward, backward and optimizer seconds. It needed torch's
`Tensor.backward`, `AdamW.step`, `clip_grad_norm_` and our step's `response_logprobs` swapped process-wide, which
the benchmarks no longer do (our loop logs the update as one phase); docs/performance.md's older tables have it.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import pstats
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

from benchmarks.common import finish, print_table
from benchmarks.gpu_trl import GSPO_MODE
from benchmarks.harness import RESULTS, bench_config, machine, median, run_training
from benchmarks.trl_loss import equality_report

SETTINGS = {"prompts": 16, "group": 8, "max_new_tokens": 48, "updates": 2}
BUCKETS = ("generate", "reward", "score_old", "prep", "update", "rest")


def our_overrides(extra: list[str]) -> list[str]:
    return [
        "agents=solo",
        "algorithm=gspo",
        f"trainer.prompts_per_step={SETTINGS['prompts']}",
        f"trainer.group_size={SETTINGS['group']}",
        f"trainer.minibatches_per_block={SETTINGS['updates']}",
        f"trainer.micro_batch_size={SETTINGS['prompts'] * SETTINGS['group'] // SETTINGS['updates']}",
        f"rollout.max_new_tokens={SETTINGS['max_new_tokens']}",
        *extra,
    ]


class Stopwatch:
    """Seconds per (bucket index, name); `index()` says which step an event belongs to (< 0: ignored)."""

    def __init__(self, index) -> None:
        self.index = index
        self.seconds: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def wrap(self, fn, name, split_by_grad: tuple[str, str] | None = None):
        def timed(*args, **kwargs):
            label = name if split_by_grad is None else split_by_grad[not torch.is_grad_enabled()]
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                i = self.index()
                if i >= 0:
                    self.seconds[i][label] += time.perf_counter() - started

        return timed


def run_ours(overrides: list[str], steps: int, out: Path) -> list[dict]:
    """Per-step buckets of our trainer, from its metrics.jsonl."""
    rows = []
    for r in run_training(our_overrides(overrides), steps, out):
        rows.append(
            {
                "total": r["total"],
                "cpu": r["cpu"],
                "generate": r["generate"],
                "reward": r["reward"],
                "score_old": r["score_own"],
                "prep": r["build_batch"],  # our learner batch: advantages and row bookkeeping
                "update": r["update"],
                "rest": r["other"],
                "tokens": sum(a["tokens"] for a in r["agents"].values()),
            }
        )
    return rows


class TrlRun:
    """One GRPOTrainer over the prompts of steps 1..S, on a copy of the warm-started agent."""

    def __init__(self, agent, task, steps: int, seed: int, out: Path) -> None:
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        problems, rows = {}, []
        for step in range(1, steps + 1):
            for p in task.train_problems(step, SETTINGS["prompts"]):
                problems[p.id] = p
                rows.append({"prompt": p.prompt, "pid": p.id})

        def reward(prompts, completions, pid, **_):
            return [g.reward for g in task.grade(completions, [problems[i] for i in pid])]

        args = GRPOConfig(
            output_dir=str(out),
            per_device_train_batch_size=SETTINGS["prompts"] * SETTINGS["group"] // SETTINGS["updates"],
            gradient_accumulation_steps=1,
            steps_per_generation=SETTINGS["updates"],
            num_generations=SETTINGS["group"],
            max_completion_length=SETTINGS["max_new_tokens"],
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            learning_rate=1e-4,
            weight_decay=0.01,
            optim="adamw_torch",
            max_steps=steps * SETTINGS["updates"],
            use_cpu=True,
            bf16=False,
            seed=seed,
            **GSPO_MODE,
        )
        self.trainer = GRPOTrainer(
            model=copy.deepcopy(agent.model),
            reward_funcs=reward,
            args=args,
            train_dataset=Dataset.from_list(rows),
            processing_class=agent.tokenizer,
        )

    def run(self) -> list[dict]:
        """Per our-step (2 optimizer steps) buckets."""
        from transformers import TrainerCallback
        from transformers.trainer_callback import PrinterCallback

        trainer, updates = self.trainer, SETTINGS["updates"]
        watch = Stopwatch(lambda: trainer.state.global_step // updates)
        marks: list[float] = []
        cpu_marks: list[float] = []
        threads: list[int] = []
        update = defaultdict(float)  # our step → seconds from step begin to optimizer step, generation included
        begun = [0.0]

        class Marks(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):
                marks.append(time.perf_counter())
                cpu_marks.append(time.process_time())

            def on_step_begin(self, args, state, control, **kwargs):
                begun[0] = time.perf_counter()

            def on_optimizer_step(self, args, state, control, **kwargs):
                update[state.global_step // updates] += time.perf_counter() - begun[0]

            def on_step_end(self, args, state, control, **kwargs):
                marks.append(time.perf_counter())
                cpu_marks.append(time.process_time())
                threads.append(torch.get_num_threads())

        trainer.add_callback(Marks())
        trainer.remove_callback(PrinterCallback)  # TRL would print its metrics dict at the end
        tokens: dict[int, float] = defaultdict(float)
        generate = trainer._generate

        def counted(prompts):
            out = generate(prompts)
            tokens[trainer.state.global_step // updates] += sum(len(ids) for ids in out[1])  # EOS included
            return out

        # this instance's methods only (TRL offers no phase times); its class and every module stay as they are
        trainer._generate = watch.wrap(counted, "generate")
        trainer._calculate_rewards = watch.wrap(trainer._calculate_rewards, "reward")
        score = trainer._generate_and_score_completions
        trainer._generate_and_score_completions = watch.wrap(score, "generate_and_score")
        logps = trainer._get_per_token_logps_and_entropies  # without grad: the old log-probs; with: the update's
        trainer._get_per_token_logps_and_entropies = watch.wrap(logps, "", ("forward", "score_old"))
        trainer.train()
        if set(threads) != {1}:
            raise RuntimeError(f"TRL ran with torch threads {sorted(set(threads))}, not 1")
        rows = []
        for i in range(len(marks) // updates):
            w = watch.seconds[i]
            total = marks[(i + 1) * updates] - marks[i * updates]
            prep = w["generate_and_score"] - w["generate"] - w["reward"] - w["score_old"]
            learn = update[i] - w["generate_and_score"]  # forward with grad, backward, clip, optimizer step
            row = {
                "total": total,
                "cpu": cpu_marks[(i + 1) * updates] - cpu_marks[i * updates],
                "generate": w["generate"],
                "reward": w["reward"],
                "score_old": w["score_old"],
                "prep": prep,  # padding, advantages, TRL's per-step metrics
                "update": learn,
                "rest": total - w["generate_and_score"] - learn,
                "tokens": tokens[i],
            }
            rows.append(row)
        return rows


def profile(fn, top: int = 12) -> list[list]:
    """Top functions by own time (tottime) of one call of fn under cProfile."""
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    stats = pstats.Stats(profiler, stream=io.StringIO())
    total = sum(v[2] for v in stats.stats.values())
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    return [
        [f"{Path(file).name}:{line} {name}"[:70], tt, tt / total, ct, calls]
        for (file, line, name), (_, calls, tt, ct, _) in rows
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="our steps per run (TRL: twice as many updates)")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--out", default=str(RESULTS / "trl_gspo.json"))
    parser.add_argument("--smoke", action="store_true", help="4 prompts × G 2, ≤ 8 tokens (benchmarks.smoke)")
    args, overrides = parser.parse_known_args()
    if args.smoke:
        SETTINGS.update(prompts=4, group=2, max_new_tokens=8)
    started = time.perf_counter()
    torch.set_num_threads(1)
    import transformers
    import trl

    from hacrl_exp.agents.factory import make_agents
    from hacrl_exp.tasks import build_task

    transformers.utils.logging.set_verbosity_error()
    info = {**machine(), "trl": trl.__version__}
    print(f"machine: {info}")
    config = bench_config(our_overrides(overrides))
    task = build_task(config.task)
    agent = make_agents(config, task, torch.device("cpu"))[0]  # the same warm-started weights our runs load
    work = Path(tempfile.mkdtemp(prefix="hacrl_trl_"))

    def ours(tag: str, steps: int) -> list[dict]:
        return run_ours(overrides, steps, work / tag)

    def theirs(tag: str, steps: int) -> list[dict]:
        return TrlRun(agent, task, steps, config.seed, work / tag).run()

    ours("warmup", 2), theirs("warmup", 2)
    kept: dict[str, list[dict]] = {"ours": [], "trl": []}
    for repeat in range(args.repeats):
        for side, fn in (("ours", ours), ("trl", theirs)):
            rows = fn(f"{side}_{repeat}", args.steps)
            kept[side] += rows[1:]
            print(f"  [{side}] repeat {repeat + 1}/{args.repeats}: {median(r['total'] for r in rows[1:]):.3f} s/step")
    keys = ("total", "cpu", *BUCKETS, "tokens")
    summary = {side: {b: median(r[b] for r in rows) for b in keys} for side, rows in kept.items()}
    ratio = summary["ours"]["total"] / summary["trl"]["total"]
    cpu_ratio = summary["ours"]["cpu"] / summary["trl"]["cpu"]
    print_table(
        ["framework", "s/step", "CPU s/step", *BUCKETS, "tokens generated"],
        [[side, s["total"], s["cpu"], *[s[b] for b in BUCKETS], int(s["tokens"])] for side, s in summary.items()],
        f"GSPO step, median of {len(kept['ours'])} steps: opt_char, 16 prompts × G 8, ≤ 48 tokens, 2 updates, 1 thread",
    )
    print_table(
        ["ratio", "value", "target", "met"],
        [["ours / TRL, seconds per step", ratio, "≤ 1.0", "yes" if ratio <= 1.0 else "no"]]
        + [["ours / TRL, CPU seconds per step", cpu_ratio, "", ""]]
        + [[f"ours / TRL, {b}", summary["ours"][b] / summary["trl"][b], "", ""] for b in BUCKETS if summary["trl"][b]],
        "Ratios",
    )

    profiles = {}
    if not args.no_profile:
        profiles["ours"] = profile(lambda: ours("profile", 3))
        profiles["trl"] = profile(lambda: theirs("profile", 3))
        for side, rows in profiles.items():
            print_table(
                ["function", "own s", "share", "cumulative s", "calls"],
                rows,
                f"cProfile, {side}: top functions by own time (3 steps)",
            )

    equality = equality_report()
    print_table(
        ["inputs", "adv ε (ours)", "loss TRL", "loss ours", "|Δ loss|", "rel. Δ", "max |Δ grad|", "max |Δ adv|"],
        [
            [
                r["case"],
                f"{r['adv_eps']:.0e}",
                f"{r['loss_trl']:.10e}",
                f"{r['loss_ours']:.10e}",
                f"{r['loss_abs_diff']:.1e}",
                f"{r['loss_rel_diff']:.1e}",
                f"{r['grad_max_abs_diff']:.1e}",
                f"{r['adv_max_abs_diff']:.1e}",
            ]
            for r in equality
        ],
        "Loss equality on identical inputs (TRL's own _compute_loss; target |Δ| ≤ 1e-6 with ε = 1e-4)",
    )
    worst = max(r["loss_abs_diff"] for r in equality if r["adv_eps"] == 1e-4)
    print(f"\nworst |Δ loss| with TRL's ε: {worst:.1e} ({'met' if worst <= 1e-6 else 'MISSED'}: ≤ 1e-6)")
    finish(
        "trl_gspo",
        started,
        args.out,
        {
            "args": vars(args),
            "overrides": overrides,
            "settings": SETTINGS,
            "machine": info,
            "summary": summary,
            "ours_over_trl": ratio,
            "ours_over_trl_cpu": cpu_ratio,
            "steps": kept,
            "profiles": profiles,
            "equality": equality,
        },
    )


if __name__ == "__main__":
    main()
