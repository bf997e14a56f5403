"""The resource planner's update peak next to a measured one, on CPU: one update of a Qwen3-architecture agent.

    python -m benchmarks.memory_peaks [--smoke]

The measured peak is the agent's resident bytes at the start of an update (weights, gradients, float32 masters,
AdamW state: counted from the tensors) plus the highest "Total Allocated" the torch profiler's memory events reach
during it (profile_memory=True: every allocation and free of the CPU allocator, no sampling). The update is the
trainer's own (`trainer.step.update`, GSPO) on rows of fixed length, every row with a non-zero advantage, two or
more micro-batches per update; one update before it creates AdamW's state. The prediction is
`agents.memory_plan.estimate_agent(...).peaks(1, offload=False, ...)[0]` for the same shape and workload.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from dataclasses import dataclass, replace

import torch

from benchmarks.common import print_table
from benchmarks.gpu_workload import Sizes, make_agents, synthetic_tokenizer
from hacrl_exp.agents.devices import resident_memory
from hacrl_exp.agents.memory_plan import Runtime, Workload, estimate_agent
from hacrl_exp.agents.model_shapes import shape_from_hf_config
from hacrl_exp.config.schema import (
    AgentConfig,
    AgentsConfig,
    AlgorithmConfig,
    Config,
    LoraConfig,
    ModelConfig,
    TrainerConfig,
)
from hacrl_exp.trainer import step
from hacrl_exp.trainer.params import learner_params
from hacrl_exp.trainer.step import LearnerBatch

WINDOW = "hacrl/measured_update"


@dataclass(frozen=True)
class Case:
    """One measured configuration: the model's sizes and rows, and how it trains."""

    label: str
    sizes: Sizes
    model: ModelConfig
    logprobs: str = "auto"
    """'full' or 'chunked' forces agents.logprobs' path (`forced_path`; the planner is told the same); 'auto' lets
    it choose."""
    chunk_bytes: int | None = None
    """Bytes of float32 logits per chunk for this case instead of agents.logprobs.CHUNK_BYTES (smaller: several
    chunks at a test's sizes)."""


def allocated_peak(fn, warmup=None, device_type: int = 0) -> int:
    """Bytes above the window's start that the allocator's live total reaches while `fn()` runs.

    torch.profiler's memory events (profile_memory=True, device type `device_type`, 0 = CPU) carry the live total of
    the blocks allocated while a profiler was on; a block allocated before is not subtracted when it is freed. So
    `warmup()` (one update: gradients, AdamW state) runs in the same session first, and the peak is read relative
    to the total at the start of `fn`'s window."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        if warmup is not None:
            warmup()
        with torch.profiler.record_function(WINDOW):
            fn()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as handle:
            events = json.load(handle)["traceEvents"]
    window = next(e for e in events if e.get("name") == WINDOW and e.get("ph") == "X")
    start, stop = window["ts"], window["ts"] + window["dur"]
    memory = sorted(
        (e["ts"], e["args"]["Total Allocated"])
        for e in events
        if e.get("name") == "[memory]" and e["args"].get("Device Type") == device_type
    )
    before = [total for ts, total in memory if ts < start]
    base = before[-1] if before else 0
    return max([base, *(total for ts, total in memory if start <= ts <= stop)]) - base


def resting_bytes(agent) -> int:
    """Weights, gradients, optimizer state and float32 masters (and their gradients) the agent holds now."""
    mib = resident_memory(agent.model, agent.optimizer, agent.reference)
    parts = ("params", "grads", "optimizer", "reference", "master")
    return int(sum(mib.get(f"memory/{k}_mib", 0.0) for k in parts) * 2**20)


def synthetic_batch(sizes: Sizes, rows: int, seed: int = 0) -> LearnerBatch:
    """`rows` rows of prompt_len + response_len random tokens, advantages ±1 (every row runs), old log-probs 0."""
    g = torch.Generator().manual_seed(seed)
    prompts = torch.randint(3, sizes.vocab, (rows, sizes.prompt_len), generator=g).tolist()
    responses = torch.randint(3, sizes.vocab, (rows, sizes.response_len), generator=g).tolist()
    old = [torch.full((sizes.response_len,), -math.log(sizes.vocab), dtype=torch.float64) for _ in range(rows)]
    return LearnerBatch.own_rows(prompts, responses, torch.tensor([1.0, -1.0] * (rows // 2)), old)


def measure(case: Case, micro_batches: int = 2) -> dict:
    """The measured and the planned update peak of `case` (bytes), and their ratio."""
    import hacrl_exp.agents.logprobs as logprobs

    sizes = case.sizes
    rows = sizes.micro_batch * micro_batches
    tokenizer = synthetic_tokenizer(sizes.vocab)
    agent = make_agents(sizes, torch.device("cpu"), tokenizer, case.model, LoraConfig(), n=1)[0]
    trainer = TrainerConfig(prompts_per_step=rows // 2, group_size=2, minibatches_per_block=1,
                            micro_batch_size=sizes.micro_batch)  # fmt: skip
    config = Config(agents=AgentsConfig(members={agent.name: AgentConfig()}), algorithm=AlgorithmConfig(name="gspo"),
                    trainer=trainer)  # fmt: skip
    params = learner_params(config)[0]
    batch = synthetic_batch(sizes, rows)
    update = lambda: step.update(agent, batch, params, [agent.name])  # noqa: E731
    with logprobs.forced_path(case.logprobs, case.chunk_bytes):
        update()  # AdamW's state and the gradients now exist
        resting = resting_bytes(agent)
        started = time.perf_counter()
        peak = resting + allocated_peak(update, warmup=update)
        seconds = time.perf_counter() - started
        path = logprobs.logprob_path(agent.model, sizes.micro_batch, sizes.prompt_len + sizes.response_len)
        work = Workload(sizes.micro_batch, sizes.prompt_len + sizes.response_len, rows, rows, False, False, 0.0, True,
                        response_len=sizes.response_len)  # fmt: skip
        shape = shape_from_hf_config(agent.model.config)
        mem = estimate_agent(agent.name, AgentConfig(model=case.model), shape, work, runtime=Runtime("cpu", path))
        planned = mem.peaks(1, False, 1 << 40)[0]
    return {"label": case.label, "path": path, "measured": peak, "planned": planned, "ratio": planned / peak,
            "resting": resting, "seconds": seconds}  # fmt: skip


SMALL = dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, intermediate=192)
MID = dict(hidden=128, layers=4, heads=4, kv_heads=2, head_dim=32, intermediate=384)
WIDE = dict(hidden=256, layers=4, heads=4, kv_heads=2, head_dim=64, intermediate=768)
FP32 = ModelConfig(source="pretrained")
MASTER = ModelConfig(source="pretrained", compute_dtype="bfloat16")
AUTOCAST_CKPT = ModelConfig(source="pretrained", compute_dtype="bfloat16", mixed_precision="autocast",
                            gradient_checkpointing=True)  # fmt: skip
QWEN_VOCAB = 151936
CASES = [  # seconds each on 2 CPU cores; tests/agents/test_memory_plan.py runs them
    Case("V 151,936, h 64 × 2, 2 × (16 + 32), fp32", Sizes(**SMALL, vocab=QWEN_VOCAB, micro_batch=2, prompt_len=16,
         response_len=32), FP32, "full"),
    Case("V 151,936, h 64 × 2, 2 × (16 + 32), bf16 autocast + ckpt", Sizes(**SMALL, vocab=QWEN_VOCAB, micro_batch=2,
         prompt_len=16, response_len=32), AUTOCAST_CKPT, "full"),
    Case("V 151,936, h 64 × 2, 2 × (16 + 32), bf16 master, 3 chunks", Sizes(**SMALL, vocab=QWEN_VOCAB, micro_batch=2,
         prompt_len=16, response_len=32), MASTER, "chunked", chunk_bytes=16 * 2**20),
    Case("V 4,096, h 128 × 4, 4 × (32 + 32), fp32", Sizes(**MID, vocab=4096, micro_batch=4, prompt_len=32,
         response_len=32), FP32, "full"),
    Case("V 4,096, h 128 × 4, 4 × (32 + 32), bf16 master + ckpt", Sizes(**MID, vocab=4096, micro_batch=4,
         prompt_len=32, response_len=32), replace(MASTER, gradient_checkpointing=True), "chunked"),
]  # fmt: skip
LARGER = [  # the same kinds at 4-8× the tokens (python -m benchmarks.memory_peaks --larger)
    Case("V 151,936, h 64 × 2, 4 × (32 + 64), fp32", Sizes(**SMALL, vocab=QWEN_VOCAB, micro_batch=4, prompt_len=32,
         response_len=64), FP32, "full"),
    Case("V 151,936, h 64 × 2, 4 × (32 + 64), bf16 autocast + ckpt", Sizes(**SMALL, vocab=QWEN_VOCAB, micro_batch=4,
         prompt_len=32, response_len=64), AUTOCAST_CKPT, "full"),
    Case("V 151,936, h 64 × 2, 8 × (32 + 64), bf16 master", Sizes(**SMALL, vocab=QWEN_VOCAB, micro_batch=8,
         prompt_len=32, response_len=64), MASTER, "chunked"),
    Case("V 8,192, h 256 × 4, 8 × (64 + 64), fp32", Sizes(**WIDE, vocab=8192, micro_batch=8, prompt_len=64,
         response_len=64), FP32, "full"),
    Case("V 8,192, h 256 × 4, 8 × (64 + 64), bf16 master", Sizes(**WIDE, vocab=8192, micro_batch=8, prompt_len=64,
         response_len=64), MASTER, "chunked"),
    Case("V 8,192, h 256 × 4, 8 × (64 + 64), bf16 master + ckpt", Sizes(**WIDE, vocab=8192, micro_batch=8,
         prompt_len=64, response_len=64), replace(MASTER, gradient_checkpointing=True), "chunked"),
]  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the smallest case only (V 4,096, fp32)")
    parser.add_argument("--larger", action="store_true", help="the cases at 4-8× the tokens (minutes)")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    results = []
    for case in [CASES[3]] if args.smoke else LARGER if args.larger else CASES:
        results.append(measure(case))
        r = results[-1]
        print(f"  {r['label']}: measured {r['measured'] / 2**20:.1f} MiB, planner {r['planned'] / 2**20:.1f} MiB "
              f"({r['ratio']:.3f}), {r['seconds']:.1f} s", flush=True)  # fmt: skip
    print_table(
        ["case", "log-prob path", "measured MiB", "planner MiB", "planner / measured"],
        [[r["label"], r["path"], r["measured"] / 2**20, r["planned"] / 2**20, r["ratio"]] for r in results],
        "Update peak on CPU: planner vs measured",
    )
    return results


if __name__ == "__main__":
    main()
