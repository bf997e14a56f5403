"""The rows of benchmarks.gpu_check, each run in its own child process: measure, then hand every result to `record`
(which appends it to gpu_check.jsonl at once), and the summary table read back from that file."""

from __future__ import annotations

import importlib.util
import json
import math
import time
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.common import print_table
from benchmarks.gpu_fsdp import measure_fsdp, workload_of
from benchmarks.gpu_workload import (
    GIB,
    Sizes,
    make_agents,
    measure_generate,
    measure_training,
    profile_step,
    synthetic_tokenizer,
)
from hacrl_exp.agents.memory_plan import Runtime, estimate_agent
from hacrl_exp.agents.model_shapes import shape_from_hf_config
from hacrl_exp.config.schema import AgentConfig, LoraConfig, ModelConfig, VLLMConfig

MIXED = ModelConfig(source="pretrained", compute_dtype="bfloat16")
"""How the check trains: float32 config weights, bf16 compute with float32 masters (mixed_precision=master)."""


def generation(sizes: Sizes, device: torch.device, record) -> None:
    """HF generate from bf16 weights: the dynamic cache, then the static one (compiled on CUDA; its first call,
    which compiles, is timed apart)."""
    agent = make_agents(sizes, device, synthetic_tokenizer(sizes.vocab), MIXED, LoraConfig(), n=1)[0]
    weights = str(next(agent.engine.generation_model().parameters()).dtype)
    record("gen_dynamic", status="ok", weights=weights, **measure_generate(agent.engine, sizes, device))
    agent.engine.cache = "static"
    started = time.perf_counter()
    first = measure_generate(agent.engine, sizes, device)  # compiles every shape the timed call uses
    compiled_s = time.perf_counter() - started
    record("gen_static", status="ok", weights=weights, first_call_s=compiled_s, first_call=first,
           **measure_generate(agent.engine, sizes, device))  # fmt: skip


def _planned(agents, sizes: Sizes, device: torch.device) -> float:
    """The planner's peak (GiB) for the agents on one device: each rests but the last, which updates."""
    runtime = Runtime(device.type)
    mems = [
        estimate_agent(
            a.name, AgentConfig(model=MIXED), shape_from_hf_config(a.model.config), workload_of(sizes), runtime=runtime
        )  # fmt: skip
        for a in agents
    ]
    return (sum(m.state for m in mems[:-1]) + mems[-1].peaks(1, False, 1 << 50)[0]) / GIB


def _training(algorithm: str):
    def row(sizes: Sizes, device: torch.device, record) -> None:
        agents = make_agents(sizes, device, synthetic_tokenizer(sizes.vocab), MIXED, LoraConfig())
        result = measure_training(agents, algorithm, sizes, device)
        result.pop("memory")
        planned = _planned(agents, sizes, device)
        record(algorithm, status="ok", planned_gib=planned, planned_over_measured=planned / result["peak_gib"],
               **result)  # fmt: skip
        record(f"{algorithm}_profile", status="ok", top=profile_step(agents, algorithm, sizes, device))

    return row


def share(sizes: Sizes, device: torch.device, record) -> None:
    """executor.placement=shared on one GPU: two agents of the workload's shape (0.6B at full size), one trained once
    (so its gradients and AdamW state exist), then a turn each: sleep and wake seconds, the bytes each wake brings,
    and what a sleeping agent still holds on the device, next to the planner's (`AgentMemory.sleeping_bytes` counts
    its own process's CUDA context too, which two agents in one process share: the measured bytes here are the
    tensors it leaves, the context is the difference)."""
    from benchmarks.gpu_workload import train_step
    from hacrl_exp.agents import residency

    agents = make_agents(sizes, device, synthetic_tokenizer(sizes.vocab), MIXED, LoraConfig())
    train_step(agents, "hacpo", sizes, 1)  # gradients and AdamW state allocated, as after a learn
    runtime = Runtime(device.type)
    for agent in agents:  # both asleep: the device holds what sleeping agents leave
        residency.sleep(agent, device)
    empty = _allocated(device)
    for agent in agents:
        mem = estimate_agent(agent.name, AgentConfig(model=MIXED), shape_from_hf_config(agent.model.config),
                             workload_of(sizes), runtime=runtime)  # fmt: skip
        started = time.perf_counter()
        residency.wake(agent, device, "learn")
        _sync(device)
        woke_s, awake = time.perf_counter() - started, _allocated(device)
        started = time.perf_counter()
        residency.sleep(agent, device)
        slept_s = time.perf_counter() - started
        record("share", status="ok", agent=agent.name, sleep_s=slept_s, wake_s=woke_s,
               moved_gib=(awake - empty) / GIB, planned_moved_gib=mem.state / GIB,
               left_gib=(_allocated(device) - empty) / GIB, both_asleep_gib=empty / GIB,
               reserved_gib=_reserved(device) / GIB, planned_asleep_gib=mem.sleeping_bytes() / GIB)  # fmt: skip


def _allocated(device: torch.device) -> int:
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else 0


def _reserved(device: torch.device) -> int:
    return torch.cuda.memory_reserved(device) if device.type == "cuda" else 0


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def fsdp(sizes: Sizes, device: torch.device, record) -> None:
    """FSDP2 at W = 1, offload off then on: one timed step each after the warm-up (offload steps are slow)."""

    def emit(name: str, result: dict) -> None:
        result = {k: v for k, v in result.items() if k != "memory"}
        record(name, status="ok", **result)

    measure_fsdp(replace(sizes, steps=1), device, synthetic_tokenizer(sizes.vocab), MIXED, emit)


def trl(sizes: Sizes, device: torch.device, record) -> None:
    try:
        import datasets  # noqa: F401
        import trl  # noqa: F401
    except ImportError as exc:
        record("trl", status=f"skipped: {exc}; carry trl's wheels (docs/gpu.md)")
        return
    from benchmarks.gpu_trl import measure_trl

    record("trl", status="ok", **measure_trl(sizes, device, synthetic_tokenizer(sizes.vocab), MIXED))


def lora(sizes: Sizes, device: torch.device, record) -> None:
    if importlib.util.find_spec("peft") is None:
        record("lora", status="skipped: peft not installed")
        return
    bf16 = ModelConfig(source="pretrained", dtype="bfloat16")
    agents = make_agents(sizes, device, synthetic_tokenizer(sizes.vocab), bf16, LoraConfig(r=16))
    result = measure_training(agents, "hacpo", sizes, device)
    result.pop("memory")
    record("lora", status="ok", **result)


def vllm(sizes: Sizes, device: torch.device, record) -> None:
    if importlib.util.find_spec("vllm") is None or device.type != "cuda":
        record("vllm", status="skipped: needs vllm and a CUDA device")
        return
    from hacrl_exp.agents.lora import merged_weights
    from hacrl_exp.rollout.vllm import VLLMRolloutEngine

    agent = make_agents(sizes, device, synthetic_tokenizer(sizes.vocab), MIXED, LoraConfig(), n=1)[0]
    started = time.perf_counter()
    engine = VLLMRolloutEngine(agent.model, agent.tokenizer, VLLMConfig(sleep_level=1), dtype="bfloat16",
                               weights=lambda: merged_weights(agent.model))  # fmt: skip
    startup = time.perf_counter() - started
    record("vllm", status="ok", startup_s=startup, **measure_generate(engine, sizes, device))


ROWS = {"gen": generation, "gspo": _training("gspo"), "hacpo": _training("hacpo"), "fsdp": fsdp, "trl": trl,
        "lora": lora, "vllm": vllm, "share": share}  # fmt: skip


def _fmt(value, spec: str) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _number(value) -> float:
    return float("nan") if value is None else float(value)


def _met(ok: bool | None) -> str:
    return "" if ok is None else ("yes" if ok else "NO")


def summary(path: Path, targets: dict) -> list[list]:
    """The table of this run's rows (those after the last 'env' line of `path`), each against its target."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    start = max(i for i, r in enumerate(lines) if r["row"] == "env")
    band = targets["planner_band"]
    rows = []
    for r in lines[start + 1 :]:
        name, status = r["row"], r.get("status", "")
        if name.endswith(("_done", "_profile")):
            continue
        if status != "ok":
            rows.append([name, status, "", "", ""])
        elif name.startswith("gen") or name == "vllm":
            ok = r["tokens_per_s"] >= targets["tokens_per_s"]
            rows.append([name, f"{r['tokens_per_s']:,.0f} tokens/s ({r['tokens']} in {r['seconds']:.2f} s)",
                         f"≥ {targets['tokens_per_s']:,.0f}", _met(ok), r.get("weights", "")])  # fmt: skip
        elif name in ("gspo", "hacpo", "lora") or name.startswith("fsdp"):
            mfu, planner = _number(r["mfu"]), _number(r.get("planned_over_measured"))
            ok = None if math.isnan(mfu) else mfu >= targets["mfu"]
            plan_ok = None if math.isnan(planner) else abs(planner - 1) <= band
            rows.append([name, f"{r['seconds']:.2f} s, {r['tflops_per_s']:.0f} TFLOP/s, MFU {_fmt(mfu, '.1%')}",
                         f"MFU ≥ {targets['mfu']:.0%}", _met(ok),
                         f"peak {_fmt(r['peak_gib'], '.1f')} GiB (reserved {_fmt(r.get('reserved_gib'), '.1f')}), "
                         f"planner {_fmt(r.get('planned_gib'), '.1f')} = {_fmt(planner, '.2f')}× "
                         f"{_met(plan_ok)}"])  # fmt: skip
        elif name == "trl":
            ok = r["ours_over_trl"] <= targets["ours_over_trl"]
            rows.append([name, f"ours {r['ours_s']:.2f} s, TRL {r['trl_s']:.2f} s per step: {r['ours_over_trl']:.2f}×",
                         f"≤ {targets['ours_over_trl']}×", _met(ok), f"trl {r['trl']}"])  # fmt: skip
    print_table(["row", "measured", "target", "met", "also"], rows, f"GPU check ({path})")
    return rows
