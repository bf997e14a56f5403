"""GPU check (issues 6, 25): generation tokens/s; step time, MFU and peak memory of a GSPO and a HACPO step; FSDP2 peaks
next to the planner's; our GSPO step next to TRL's GRPOTrainer in GSPO mode. Every row is kept as it is measured.

    benchmarks/gpu_check.sh [--rows gen,gspo,hacpo,fsdp,trl] [--out DIR]    # one GPU, no internet, ≤ 3 min on an H200
    python -m benchmarks.gpu_check --smoke                                  # the same code at tiny sizes on CPU

Each row runs in its own child process with a time budget (`BUDGET_S`; the child is killed when it is spent); the
child appends each measurement to gpu_check.jsonl (in --out, default $OUT, else benchmarks/results) the moment it
is taken, as one JSON line, flushed and fsynced, and prints it; a row that times out or fails gets a line saying so.
A kill at any moment keeps every line written. The summary table at the end is read back from the file.

Workload (benchmarks.gpu_workload): Qwen3-architecture agents (~0.6B: hidden 1024, 28 layers, 16 query / 8 KV heads,
intermediate 3072, vocabulary 151936, tied embeddings) with random weights and a locally built tokenizer; 16 prompts
× G 8, 128 prompt + 256 response tokens, micro-batch 16, 2 updates per step; the trainer's own scoring, batch
building and `trainer.step.update` on synthetic rollouts (generation is measured in its own row). Training runs as
the config's defaults now do on a GPU: model.dtype=float32, compute_dtype=bfloat16, mixed_precision=master (bf16
weights, float32 masters and AdamW state, fused AdamW), the chunked log-prob path, no gradient checkpointing.
Rows:
  gen     HF generate of 128 rows × 256 new tokens from bf16 weights: rows sorted by prompt length, dynamic cache;
          then the static cache (transformers compiles decoding with CUDA graphs on CUDA; the first call compiles)
  gspo    a GSPO step of 2 agents on one GPU; the planner's peak for it; then one more step under torch.profiler:
          the top kernels by GPU time (docs/performance.md)
  hacpo   the same for HACPO
  fsdp    one agent as FSDP2 over one rank (NCCL), offload off and on, each peak next to the planner's
  trl     our GSPO step (1 agent) next to TRL's GRPOTrainer in GSPO mode on the same rows (benchmarks.gpu_trl); TRL and
          its datasets dependency travel as wheels (docs/gpu.md); skipped, with a line, when trl does not import
  lora, vllm  (not in the default set) a HACPO step with LoRA r=16 on a bf16 base; vLLM generation
  share   (not in the default set) executor.placement=shared on one GPU: two agents, sleep and wake seconds, the
          bytes a wake moves and a sleeping agent leaves, beside the planner's (agents.residency, memory_plan)
MFU = executed model FLOPs / (seconds × 989 TFLOP/s, the H200's dense bf16 peak): 2·N_body per token forward plus
2·V·h per token the head projects (responses only on the chunked path), ×3 for trained rows; attention scores and
recomputation are not counted (benchmarks.gpu_workload.forward_flops).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from benchmarks.gpu_workload import SMOKE, Sizes

ROWS = ("gen", "gspo", "hacpo", "fsdp", "trl")
BUDGET_S = {"gen": 60, "gspo": 26, "hacpo": 32, "fsdp": 36, "trl": 26, "lora": 30, "vllm": 90, "share": 30}
"""Seconds each row's child may take on an H200 (import, build and measurement included): 180 s for the default set."""
SMOKE_BUDGET_S = 240
CPU_SIZES = Sizes(256, 4, 4, 2, 64, 768, 151936, prompts=4, group=4, prompt_len=32, response_len=64, micro_batch=8)
"""--size cpu: a step a CPU does in seconds, with the real vocabulary (the CPU profile in docs/performance.md)."""
TARGETS = {"mfu": 0.30, "tokens_per_s": 15000.0, "planner_band": 0.15, "ours_over_trl": 0.8}


def default_out() -> Path:
    return Path(os.environ.get("OUT") or "benchmarks/results")


class Recorder:
    """Appends rows to a JSONL file, each written whole, flushed and fsynced before the next is measured."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, row: str, **fields) -> dict:
        record = {"row": row, "time": time.strftime("%H:%M:%S"), **fields}
        line = json.dumps(_finite(record), default=_plain)
        with open(self.path, "a") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        print(f"[gpu_check] {line}", flush=True)
        return record


def _plain(value):
    return float(value) if hasattr(value, "__float__") else str(value)


def _finite(value):
    """NaN (a CPU run has no device peak or MFU) as null, so every line is strict JSON."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def sizes_of(size: str, steps: int | None) -> Sizes:
    sizes = {"smoke": SMOKE, "cpu": CPU_SIZES, "full": Sizes()}[size]
    return replace(sizes, steps=steps or sizes.steps)


def run_row(name: str, size: str, out: Path, steps: int | None) -> None:
    """One row, in this process (the child's side)."""
    from benchmarks import gpu_rows

    record = Recorder(out)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gpu_rows.ROWS[name](sizes_of(size, steps), device, record)


def drive(rows: list[str], size: str, out: Path, steps: int | None, budgets: dict[str, float]) -> int:
    """Every row in its own child process within its budget; returns how many rows failed or timed out."""
    record = Recorder(out)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "cpu"
    import transformers

    record("env", device=device, torch=torch.__version__, transformers=transformers.__version__, size=size,
           **asdict(sizes_of(size, steps)))  # fmt: skip
    bad = 0
    running: list[subprocess.Popen] = []

    def stop(signum, frame):  # killed from outside (the script's timeout): take the row's child with us
        for child in running:
            os.killpg(child.pid, signal.SIGKILL)
        record("interrupted", status=f"signal {signum}")
        sys.exit(128 + signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    for name in rows:
        command = [sys.executable, "-m", "benchmarks.gpu_check", "--child", name, "--size", size, "--out", str(out)]
        command += ["--steps", str(steps)] if steps else []
        started = time.perf_counter()
        child = subprocess.Popen(command, start_new_session=True, stderr=subprocess.PIPE, text=True)
        running[:] = [child]
        try:
            _, stderr = child.communicate(timeout=budgets[name])
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            record(name, status="timeout", budget_s=budgets[name])
            bad += 1
            continue
        seconds = time.perf_counter() - started
        if child.returncode != 0:
            tail = [line for line in stderr.strip().splitlines() if line.strip()][-12:]
            record(name, status="failed", exit_code=child.returncode, seconds=seconds, stderr_tail=tail)
            bad += 1
        else:
            record(f"{name}_done", status="ok", seconds=seconds)
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows of {sorted(BUDGET_S)}")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on CPU in seconds (= --size smoke)")
    parser.add_argument("--size", choices=("full", "cpu", "smoke"), default=None)
    parser.add_argument("--steps", type=int, default=None, help="timed steps per training row (after one warm-up)")
    parser.add_argument("--out", default=None, help="folder of gpu_check.jsonl (default $OUT, else benchmarks/results)")
    parser.add_argument("--inline", action="store_true", help="every row in this process, no budgets (a CPU test)")
    parser.add_argument("--budget", action="append", default=[], metavar="ROW=S", help="a row's budget in seconds")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    size = args.size or ("smoke" if args.smoke else "full")
    if args.child:
        run_row(args.child, size, Path(args.out), args.steps)
        return 0
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(rows) - set(BUDGET_S))
    if unknown:
        parser.error(f"--rows: unknown {unknown}; known: {sorted(BUDGET_S)}")
    if size == "full" and not torch.cuda.is_available():
        parser.error("no CUDA device visible; run with --smoke (or --size cpu) for the CPU check")
    folder = Path(args.out) if args.out else default_out()
    out = folder / "gpu_check.jsonl"
    budgets = BUDGET_S if size == "full" else dict.fromkeys(BUDGET_S, SMOKE_BUDGET_S)
    budgets = {**budgets, **{k: float(v) for k, v in (b.split("=", 1) for b in args.budget)}}
    if args.inline:
        Recorder(out)("env", size=size, inline=True, **asdict(sizes_of(size, args.steps)))
        for name in rows:
            run_row(name, size, out, args.steps)
        bad = 0
    else:
        bad = drive(rows, size, out, args.steps, budgets)
    from benchmarks.gpu_rows import summary

    summary(out, TARGETS)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
