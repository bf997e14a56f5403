"""The GPU check's workload (benchmarks.gpu_check): Qwen3-architecture agents built from a config, synthetic
rollouts, and timed generation and training steps through the trainer's own code."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

from hacrl_exp.agents.agent import Agent, build_agent
from hacrl_exp.agents.devices import memory_metrics
from hacrl_exp.agents.logprobs import batched_response_logprobs, logprob_path
from hacrl_exp.agents.lora import is_lora
from hacrl_exp.config.schema import (
    AgentConfig,
    AgentsConfig,
    AlgorithmConfig,
    Config,
    LoraConfig,
    ModelConfig,
    RolloutConfig,
    TrainerConfig,
)
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.trainer import step as learner_step
from hacrl_exp.trainer.params import learner_params
from hacrl_exp.trainer.step import SourceRollouts

PEAK_FLOPS = {"cuda": 989e12}  # H200 dense bf16; MFU is left out on other devices
GIB = 1 << 30


@dataclass(frozen=True)
class Sizes:
    hidden: int = 1024
    layers: int = 28
    heads: int = 16
    kv_heads: int = 8
    head_dim: int = 128
    intermediate: int = 3072
    vocab: int = 151936
    prompts: int = 16
    group: int = 8
    prompt_len: int = 128
    response_len: int = 256
    micro_batch: int = 16
    steps: int = 2
    """Timed steps per row, after one warm-up step."""


SMOKE = Sizes(64, 2, 4, 2, 16, 128, 512, prompts=2, group=4, prompt_len=8, response_len=8, micro_batch=4, steps=1)


def synthetic_tokenizer(vocab: int) -> transformers.PreTrainedTokenizerFast:
    """Token i is the word 't<i>' (ids 0-2: pad, eos, unk); words are space-separated, so re-tokenising round-trips."""
    words = ["<pad>", "<eos>", "<unk>"] + [f"t{i}" for i in range(3, vocab)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>", padding_side="left"
    )


def qwen3(sizes: Sizes, device: torch.device, seed: int) -> transformers.PreTrainedModel:
    """A randomly initialised Qwen3ForCausalLM in float32, built on `device` from its config."""
    config = transformers.Qwen3Config(
        vocab_size=sizes.vocab,
        hidden_size=sizes.hidden,
        intermediate_size=sizes.intermediate,
        num_hidden_layers=sizes.layers,
        num_attention_heads=sizes.heads,
        num_key_value_heads=sizes.kv_heads,
        head_dim=sizes.head_dim,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
    )
    torch.manual_seed(seed)
    with torch.device(device):
        return transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def make_agents(
    sizes, device, tokenizer, model_cfg: ModelConfig, lora: LoraConfig, n: int = 2, cache: str = "dynamic"
) -> list[Agent]:
    """n agents of the workload's shape, each its own random init; cache: the HF engine's KV cache (rollout.hf)."""
    cfg = AgentConfig(model=model_cfg, lora=lora, lr=1e-6, weight_decay=0.0)
    rollout = RolloutConfig(max_new_tokens=sizes.response_len, max_batch_size=sizes.prompts * sizes.group,
                            hf_cache=cache)  # fmt: skip
    return [
        build_agent(
            f"agent{i}",
            cfg,
            qwen3(sizes, device, seed=i),
            tokenizer,
            device=device,
            kl_coef=0.0,
            max_prompt_tokens=sizes.prompt_len,
            max_batch_size=sizes.prompts * sizes.group,
            rollout=rollout,
        )
        for i in range(n)
    ]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def random_rows(sizes: Sizes, rows: int, length: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, sizes.vocab, (rows, length), generator=g).tolist()


def measure_generate(engine, sizes: Sizes, device: torch.device) -> dict:
    """HF/vLLM `generate` of prompts × group rows, response_len new tokens each; a short warm-up first."""
    prompts = random_rows(sizes, sizes.prompts, sizes.prompt_len, seed=1)
    engine.generate(prompts[:2], 2, SamplingSettings(max_new_tokens=4))
    sync(device)
    start = time.perf_counter()
    out = engine.generate(prompts, sizes.group, SamplingSettings(max_new_tokens=sizes.response_len))
    sync(device)
    seconds = time.perf_counter() - start
    return {"tokens": out.num_tokens, "seconds": seconds, "tokens_per_s": out.num_tokens / seconds}


def synthetic_pool(agents, sizes: Sizes, step: int) -> dict[int, SourceRollouts]:
    """Each agent's P·G rollouts (random tokens, random 0/1 rewards), scored by its model: phase 3 of a step."""
    pool = {}
    rows = sizes.prompts * sizes.group
    for i, agent in enumerate(agents):
        prompts = random_rows(sizes, sizes.prompts, sizes.prompt_len, seed=100 + i)
        prompt_ids = [prompts[r // sizes.group] for r in range(rows)]
        responses = random_rows(sizes, rows, sizes.response_len, seed=1000 * step + i)
        g = torch.Generator().manual_seed(step * 7 + i)
        rewards = torch.randint(0, 2, (rows,), generator=g).double()
        old = batched_response_logprobs(agent.model, prompt_ids, responses, agent.pad_id, sizes.micro_batch)
        texts = agent.tokenizer.batch_decode(responses, skip_special_tokens=True)
        index = [r // sizes.group for r in range(rows)]
        sampling = SamplingSettings(max_new_tokens=sizes.response_len)
        pool[i] = SourceRollouts(
            agent=i, prompt_index=index, prompt_ids=prompt_ids, response_ids=responses, texts=texts, rewards=rewards,
            old_token_logp=old, sampling=sampling, categories=["add3"] * rows, problem_prompt_ids=prompts,
        )  # fmt: skip
    return pool


def step_config(agent_names: list[str], algorithm_name: str, sizes: Sizes) -> Config:
    """The learners' config of the workload: P prompts × G, micro-batch, 2 updates per step, all_to_all α 1."""
    trainer = TrainerConfig(prompts_per_step=sizes.prompts, group_size=sizes.group, micro_batch_size=sizes.micro_batch)
    members = AgentsConfig(members={name: AgentConfig() for name in agent_names})
    rollout = RolloutConfig(max_new_tokens=sizes.response_len)
    return Config(agents=members, algorithm=AlgorithmConfig(name=algorithm_name), trainer=trainer, rollout=rollout)


def forward_flops(agent: Agent, rows: list[tuple[int, int]]) -> float:
    """Model FLOPs of one forward over rows of (prompt, response) tokens, as run: 2·N_body per token for the decoder
    (N_body = parameters less the embedding table), and 2·V·h per token the output head projects (the response
    tokens only on the chunked log-prob path, every position on the full one). Attention scores are not counted."""
    model = agent.model.get_base_model() if hasattr(agent.model, "get_base_model") else agent.model
    config = model.config
    head = config.vocab_size * config.hidden_size
    body = param_count(agent) - head * (1 if getattr(config, "tie_word_embeddings", True) else 2)
    width = max(p + r for p, r in rows)
    chunked = logprob_path(agent.model, len(rows), width) == "chunked"
    tokens = sum(p + r for p, r in rows)
    projected = sum(r for _, r in rows) if chunked else tokens
    return 2.0 * body * tokens + 2.0 * head * projected


def train_step(agents, algorithm_name: str, sizes: Sizes, step: int) -> tuple[float, float]:
    """One step without generation: score own, build each learner's batch, update. Returns (seconds, FLOPs).

    FLOPs: `forward_flops` of the scoring forward, and of each trained row 3× (forward, backward: 2×; 2× in all
    under LoRA, whose frozen weights get no gradient); recomputation by gradient checkpointing is not counted."""
    names, device = [a.name for a in agents], next(agents[0].model.parameters()).device
    params = learner_params(step_config(names, algorithm_name, sizes))
    n = len(agents)
    sync(device)
    start = time.perf_counter()
    pool = synthetic_pool(agents, sizes, step)
    flops = sum(
        forward_flops(a, [(len(p), len(r)) for p, r in zip(v.prompt_ids, v.response_ids)])
        for a, v in zip(agents, pool.values())
    )
    for k, agent in enumerate(agents):
        sources = {j: pool[j].shared() for j in params[k].sources}
        batch = learner_step.build_batch(pool[k], sources, torch.ones(n), agent.tokenizer, params[k])
        learner_step.update(agent, batch, params[k], names)
        passes = 2 if is_lora(agent.model) else 3  # forward + backward
        run = (batch.advantages != 0).tolist()
        rows = [(len(p), len(r)) for p, r, keep in zip(batch.prompt_ids, batch.response_ids, run) if keep]
        for start_row in range(0, len(rows), sizes.micro_batch):
            flops += passes * forward_flops(agent, rows[start_row : start_row + sizes.micro_batch])
    sync(device)
    return time.perf_counter() - start, float(flops)


def param_count(agent: Agent) -> int:
    """N of the model FLOPs: the base model's parameters (adapters are negligible), tied embeddings once."""
    model = agent.model.get_base_model() if hasattr(agent.model, "get_base_model") else agent.model
    return sum(p.numel() for n, p in model.named_parameters() if ".lora_" not in n)


def measure_training(agents, algorithm: str, sizes: Sizes, device: torch.device) -> dict:
    """Seconds, FLOPs, TFLOP/s and MFU of a step (mean of sizes.steps after one warm-up), the device's peak
    allocated and reserved bytes over the timed steps, and each agent's resident memory."""
    train_step(agents, algorithm, sizes, step=0)  # warm-up: kernels, allocator, AdamW state
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, flops = zip(*(train_step(agents, algorithm, sizes, step=s + 1) for s in range(sizes.steps)))
    seconds, step_flops = sum(times) / len(times), sum(flops) / len(flops)
    cuda = device.type == "cuda"
    peak = torch.cuda.max_memory_allocated(device) / GIB if cuda else float("nan")
    reserved = torch.cuda.max_memory_reserved(device) / GIB if cuda else float("nan")
    memory = memory_metrics(agents, reset_peak=False)
    parts = ("memory/params_mib", "memory/grads_mib", "memory/optimizer_mib", "memory/master_mib")
    resident = max(sum(m.get(k, 0.0) for k in parts) for m in memory.values())
    achieved = step_flops / seconds
    mfu = achieved / PEAK_FLOPS[device.type] if device.type in PEAK_FLOPS else float("nan")
    return {
        "seconds": seconds,
        "flops": step_flops,
        "tflops_per_s": achieved / 1e12,
        "mfu": mfu,
        "peak_gib": peak,
        "reserved_gib": reserved,
        "resident_gib_per_agent": resident / 1024,
        "memory": memory,
    }


def profile_step(agents, algorithm: str, sizes: Sizes, device: torch.device, top: int = 12) -> list[dict]:
    """Where one more step's time goes: torch.profiler's operators (CPU) or kernels (CUDA) by self time, the top
    `top` with their share of the profiled total."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        train_step(agents, algorithm, sizes, step=99)
    events = prof.key_averages()
    attr = "self_device_time_total" if cuda else "self_cpu_time_total"
    total = sum(getattr(e, attr) for e in events) or 1.0
    ranked = sorted(events, key=lambda e: getattr(e, attr), reverse=True)[:top]
    return [{"name": e.key[:90], "ms": getattr(e, attr) / 1e3, "share": getattr(e, attr) / total, "calls": e.count}
            for e in ranked]  # fmt: skip
