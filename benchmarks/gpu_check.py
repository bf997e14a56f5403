"""GPU check (issue 6): generation tokens/s, and step time, peak memory and MFU of a GSPO and a HACPO step.

    scripts/gpu_check.sh [--out PATH]           # one GPU, no internet, ≤ 8 min; needs only torch + transformers
    python -m benchmarks.gpu_check --smoke      # the same code at tiny sizes on CPU, in seconds (a test runs it)

Two agents share one GPU: Qwen3-architecture models (~0.6B: hidden 1024, 28 layers, 16 query / 8 KV heads,
intermediate 3072, vocabulary 151936, tied embeddings) built from a config with random weights, and a tokenizer
built locally, so nothing is downloaded. Training agents keep float32 master weights and AdamW state and compute
in bf16 under autocast, with gradient checkpointing; the LoRA row trains r=16 adapters on a frozen bf16 base.
Generation runs through the HF rollout engine (and the vLLM one when vllm imports); the training steps run the
trainer's own scoring (old log-probs), batch building (re-tokenisation, advantages) and `trainer.step.update` on
synthetic rollouts of fixed length. A step excludes generation (measured on its own rows). Two more rows shard one
agent with FSDP2 over a one-rank group (offload off, on) and print its peak next to the planner's (benchmarks.gpu_fsdp).

MFU = model FLOPs / (seconds × peak). Model FLOPs: 2·N per token forward, 4·N per token backward (2·N when the
weights are frozen, as under LoRA), N = parameters (tied embeddings once); attention-score FLOPs and gradient
checkpointing's recomputation are not counted. Peak: H200 dense bf16 989 TFLOP/s (NVIDIA's figure; this
workplace measured ~790 TFLOP/s for a large bf16 matmul). Rows with advantage 0 are skipped by the update and
not counted.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import platform
import time
from dataclasses import asdict, replace

import torch
import transformers

from benchmarks.common import print_table, write_json
from benchmarks.gpu_fsdp import measure_fsdp
from benchmarks.gpu_workload import (
    SMOKE,
    Sizes,
    make_agents,
    measure_generate,
    measure_training,
    param_count,
    synthetic_tokenizer,
)
from hacrl_exp.agents.agent import Agent
from hacrl_exp.config.schema import LoraConfig, ModelConfig, VLLMConfig


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs on CPU in seconds")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per training row")
    default_out = os.path.join(os.environ.get("OUT", "benchmarks/results"), "gpu_check.json")
    parser.add_argument("--out", default=default_out)
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else Sizes()
    sizes = replace(sizes, steps=args.steps or sizes.steps)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not args.smoke and device.type != "cuda":
        parser.error("no CUDA device visible; run with --smoke for the CPU check")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    env = {"device": name, "torch": torch.__version__, "transformers": transformers.__version__, **asdict(sizes)}
    print(env, flush=True)
    tokenizer = synthetic_tokenizer(sizes.vocab)
    mixed = ModelConfig(source="pretrained", compute_dtype="bfloat16", gradient_checkpointing=True)
    results: dict = {"env": env}
    rows = []

    agents = make_agents(sizes, device, tokenizer, mixed, LoraConfig())
    params = param_count(agents[0])
    results["hf_generate_mixed"] = measure_generate(agents[0].engine, sizes, device)
    rows.append(_generate_row("HF generate, fp32 weights + bf16 autocast", results["hf_generate_mixed"]))
    for algorithm in ("gspo", "hacpo"):
        results[algorithm] = measure_training(agents, algorithm, sizes, device)
        rows.append(_training_row(f"{algorithm.upper()} step, 2 agents on one device", results[algorithm]))
    del agents
    if device.type == "cuda":
        torch.cuda.empty_cache()

    lora_agent = None
    if _has("peft"):
        bf16 = replace(mixed, dtype="bfloat16", compute_dtype=None)
        lora_agents = make_agents(sizes, device, tokenizer, bf16, LoraConfig(r=16))
        results["hf_generate_bf16"] = measure_generate(lora_agents[0].engine, sizes, device)
        rows.append(_generate_row("HF generate, bf16 weights (LoRA agent)", results["hf_generate_bf16"]))
        results["hacpo_lora"] = measure_training(lora_agents, "hacpo", sizes, device)
        rows.append(_training_row("HACPO step, LoRA r=16 on a bf16 base", results["hacpo_lora"]))
        lora_agent = lora_agents[0]
    else:
        rows.append(["HACPO step, LoRA", "skipped: peft not installed"])
    rows.append(["vLLM generate (LoRA agent, merged weights)", *_vllm_row(lora_agent, sizes, device, results)])
    del lora_agent
    results |= measure_fsdp(sizes, device, tokenizer, mixed)
    for offload in ("off", "on"):
        r = results[f"fsdp_offload_{offload}"]
        label = f"FSDP2 W=1 GSPO step, offload {offload} (planner: {r['planned_gib']:.1f} GiB)"
        rows.append(_training_row(label, r))

    print_table(
        ["measurement", "tokens", "s", "tokens/s", "TFLOP/s", "MFU", "peak GiB (device)", "resident GiB/agent"],
        [row + [""] * (8 - len(row)) for row in rows],
        f"GPU check: Qwen3 {params / 1e9:.2f}B random init, 2 agents on {name}; P {sizes.prompts} x G {sizes.group}, "
        f"prompt {sizes.prompt_len} + response {sizes.response_len} tokens; {sizes.steps} timed steps after 1 warm-up",
    )
    write_json(args.out, results)
    return results


def _generate_row(label: str, g: dict) -> list:
    return [label, g["tokens"], f"{g['seconds']:.2f}", f"{g['tokens_per_s']:,.0f}"]


def _training_row(label: str, r: dict) -> list:
    mfu = "n/a (no peak known)" if math.isnan(r["mfu"]) else f"{r['mfu']:.1%}"
    peak = "n/a (CPU)" if math.isnan(r["peak_gib"]) else f"{r['peak_gib']:.1f}"
    return [
        label,
        "",
        f"{r['seconds']:.2f}",
        "",
        f"{r['tflops_per_s']:.1f}",
        mfu,
        peak,
        f"{r['resident_gib_per_agent']:.2f}",
    ]


def _has(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def _vllm_row(agent: Agent | None, sizes: Sizes, device: torch.device, results: dict) -> list:
    """tokens, s, tokens/s of the vLLM backend on a bf16 agent, or why it was not measured."""
    if not _has("vllm"):
        return ["skipped: vllm not installed"]
    if device.type != "cuda" or agent is None:
        return ["skipped: needs a CUDA device and peft"]
    from hacrl_exp.agents.lora import merged_weights
    from hacrl_exp.rollout.vllm import VLLMRolloutEngine

    start = time.perf_counter()
    engine = VLLMRolloutEngine(
        agent.model,
        agent.tokenizer,
        VLLMConfig(sleep_level=1),
        dtype="bfloat16",
        weights=lambda: merged_weights(agent.model),
    )
    startup = time.perf_counter() - start
    gen = results["vllm_generate"] = {**measure_generate(engine, sizes, device), "startup_s": startup}
    return _generate_row("", gen)[1:]


if __name__ == "__main__":
    main()
