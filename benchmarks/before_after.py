"""The GPU check's workload before and after issue 25, side by side in one process, on whatever device is here (a CPU
analogue of the issue's H200 table: its sizes shrink to what a CPU does in minutes, the vocabulary stays 151,936).

    python -m benchmarks.before_after [--smoke] [--steps 2] [--no-profile]

before: what the code at 85e0f16 ran: float32 weights under bf16 autocast (mixed_precision=autocast), gradient
        checkpointing, the full log-prob path (every position's float32 logits), generation from the float32 weights.
after:  what it runs now on a GPU: bf16 weights with float32 masters (mixed_precision=master), no checkpointing,
        the chunked log-prob path, generation from the bf16 weights.
Per side: HF generation tokens/s; a GSPO step of 2 agents (seconds, the process's peak allocated bytes above the
agents' resident state from the torch profiler's allocator events, as benchmarks.memory_peaks); then the top
operators of one more step (torch.profiler, self CPU time). On a CPU without bf16 matrix units, bf16 runs slower
than float32: the seconds here say nothing of a GPU's; the memory does.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch

from benchmarks.common import finish, print_table
from benchmarks.gpu_check import CPU_SIZES
from benchmarks.gpu_workload import (
    SMOKE,
    make_agents,
    measure_generate,
    profile_step,
    synthetic_tokenizer,
    train_step,
)
from benchmarks.harness import RESULTS, machine
from benchmarks.memory_peaks import allocated_peak, resting_bytes
from hacrl_exp.agents.logprobs import forced_path
from hacrl_exp.config.schema import LoraConfig, ModelConfig

SIDES = {
    "before": (ModelConfig(source="pretrained", compute_dtype="bfloat16", mixed_precision="autocast",
                           gradient_checkpointing=True), "full"),
    "after": (ModelConfig(source="pretrained", compute_dtype="bfloat16"), "chunked"),
}  # fmt: skip


def measure_side(side: str, sizes, device: torch.device, tokenizer, profile: bool = True) -> dict:
    """Generation, step seconds and peak bytes, and (with `profile`) the step's top operators, for one side."""
    model_cfg, path = SIDES[side]
    with forced_path(path):  # the scoring of old log-probs and the update both ask for 'auto'
        agents = make_agents(sizes, device, tokenizer, model_cfg, LoraConfig())
        generation = measure_generate(agents[0].engine, sizes, device)
        train_step(agents, "gspo", sizes, step=0)  # AdamW state, gradients
        resting = sum(resting_bytes(a) for a in agents)
        seconds = []

        def timed_steps() -> None:
            for s in range(sizes.steps):
                seconds.append(train_step(agents, "gspo", sizes, step=s + 1)[0])

        peak = resting + allocated_peak(timed_steps)
        top = profile_step(agents, "gspo", sizes, device, top=8) if profile else []
    return {"generation": generation, "step_s": sum(seconds) / len(seconds), "peak_bytes": peak,
            "resting_bytes": resting, "top": top}  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per side (after one warm-up)")
    parser.add_argument("--out", default=str(RESULTS / "before_after.json"))
    parser.add_argument("--no-profile", action="store_true", help="skip the profiled step (most of a smoke run)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sizes = SMOKE if args.smoke else CPU_SIZES
    sizes = replace(sizes, steps=args.steps or sizes.steps)
    device = torch.device("cpu")
    info = machine()
    print(f"machine: {info}\nsizes: {sizes}", flush=True)
    tokenizer = synthetic_tokenizer(sizes.vocab)
    results = {}
    for side in SIDES:
        results[side] = measure_side(side, sizes, device, tokenizer, profile=not args.no_profile)
        r = results[side]
        print(f"  [{side}] {r['generation']['tokens_per_s']:.0f} tokens/s, {r['step_s']:.2f} s/step, "
              f"peak {r['peak_bytes'] / 2**20:.0f} MiB", flush=True)  # fmt: skip
    b, a = results["before"], results["after"]
    print_table(
        ["measurement", "before", "after", "after / before"],
        [
            ["HF generate, tokens/s", b["generation"]["tokens_per_s"], a["generation"]["tokens_per_s"],
             a["generation"]["tokens_per_s"] / b["generation"]["tokens_per_s"]],
            ["GSPO step (2 agents), s", b["step_s"], a["step_s"], a["step_s"] / b["step_s"]],
            ["GSPO step peak allocated, MiB", b["peak_bytes"] / 2**20, a["peak_bytes"] / 2**20,
             a["peak_bytes"] / b["peak_bytes"]],
            ["agents' resident state, MiB", b["resting_bytes"] / 2**20, a["resting_bytes"] / 2**20,
             a["resting_bytes"] / b["resting_bytes"]],
        ],
        f"Before → after on {device.type} (P {sizes.prompts} × G {sizes.group}, {sizes.prompt_len} + "
        f"{sizes.response_len} tokens, micro-batch {sizes.micro_batch}, h {sizes.hidden} × {sizes.layers} layers, "
        f"V {sizes.vocab:,})",
    )  # fmt: skip
    for side in SIDES if not args.no_profile else ():
        print_table(["operator", "self ms", "share", "calls"],
                    [[t["name"], t["ms"], t["share"], t["calls"]] for t in results[side]["top"]],
                    f"torch.profiler, one GSPO step, {side}: top operators by self CPU time")  # fmt: skip
    finish("before_after", started, args.out, {"machine": info, "sizes": vars(sizes), "results": results})
    return results


if __name__ == "__main__":
    main()
